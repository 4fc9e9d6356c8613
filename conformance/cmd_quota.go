package conformance

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const quotaUsage = "quota set|describe client-id|user NAME [key=value]..."

// quota set ENTITY NAME key=value...: AlterClientQuotas (KIP-546) for
// one client-id or user (the suite's prefix is not applied: quota
// entities are not topics). quota describe ENTITY NAME prints the
// entity's quotas as "key=value" lines, sorted (DescribeClientQuotas,
// exact match).
func cmdQuota(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 {
		ts.Fatalf("usage: %s", quotaUsage)
	}
	s := st(ts)
	entity := map[string]string{"client-id": "client-id", "user": "user"}[args[1]]
	if entity == "" {
		ts.Fatalf("usage: %s", quotaUsage)
	}
	ctx, cancel := ctxFor(15 * time.Second)
	defer cancel()
	ent := kadm.ClientQuotaEntity{{Type: entity, Name: kadm.StringPtr(args[2])}}
	switch args[0] {
	case "set":
		var ops []kadm.AlterClientQuotaOp
		for _, kv := range args[3:] {
			k, v, ok := strings.Cut(kv, "=")
			f, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				ts.Fatalf("quota set: want key=number, got %q", kv)
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
		}
		res, err := s.adm(ts).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err == nil {
			err = awaitQuotaEverywhere(ctx, s.client(ts), entity, args[2], ops)
		}
		finish(ts, neg, err)
	case "describe":
		q, err := s.adm(ts).DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: entity, MatchName: kadm.StringPtr(args[2]), MatchType: 0}})
		finish(ts, neg, err)
		var lines []string
		for _, e := range q {
			for _, v := range e.Values {
				lines = append(lines, fmt.Sprintf("%s=%g", v.Key, v.Value))
			}
		}
		fmt.Fprint(ts.Stdout(), strings.Join(lines, "\n")+"\n")
	default:
		ts.Fatalf("usage: %s", quotaUsage)
	}
}

// awaitQuotaEverywhere waits until every broker's DescribeClientQuotas
// answers ops' values for the entity. A broker enforces its own copy of
// the quotas, which follows the metadata asynchronously (in Kafka and in
// Vltava alike), so a script checking a quota's effect right after
// setting it would otherwise race the copy of the partition's leader.
func awaitQuotaEverywhere(ctx context.Context, cl *kgo.Client, entity, name string, ops []kadm.AlterClientQuotaOp) error {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = true
	req.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: entity, Match: kmsg.StringPtr(name), MatchType: kmsg.QuotasMatchTypeExact}}
	has := func(resp *kmsg.DescribeClientQuotasResponse) bool {
		for _, op := range ops {
			found := false
			for _, e := range resp.Entries {
				for _, v := range e.Values {
					found = found || v.Key == op.Key && v.Value == op.Value
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return onEveryBroker(ctx, cl, "quota: set, but", "does not answer it yet", func(b *kgo.Broker) (bool, error) {
		resp, err := req.RequestWith(ctx, b)
		return err == nil && resp.ErrorCode == 0 && has(resp), err
	})
}

// throttleHook counts the responses a broker throttled (KIP-219).
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}
