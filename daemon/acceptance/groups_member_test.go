package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// envMember makes the test binary a consumer group member instead of
// running tests (see init): the group tests start each member as its own
// OS process, so a kill -9 is real.
const envMember = "VLTAVA_ACCEPTANCE_GROUP_MEMBER"

// memberSpec configures one member process; it travels as JSON in
// envMember.
type memberSpec struct {
	Addr, Topic, Group, Name string
	// Balancer is range, roundrobin, cooperative-sticky, server-range or
	// server-uniform (KIP-848, assigned on the broker).
	Balancer string
}

// memberEvent is one line a member writes to stdout: a partition
// assigned, revoked or lost, a record consumed, or offsets committed
// (Ps/P/O), stamped with the member's wall clock (T, Unix ns).
type memberEvent struct {
	Ev string  `json:"ev"` // assigned, revoked, lost, rec, commit, error
	Ps []int32 `json:"ps,omitempty"`
	P  int32   `json:"p"`
	O  int64   `json:"o"`
	T  int64   `json:"t"`
	S  string  `json:"s,omitempty"`
}

func init() {
	if spec := os.Getenv(envMember); spec != "" {
		os.Exit(runMember(spec))
	}
}

// runMember consumes until SIGTERM, reporting every event on stdout. It
// commits after each poll, before it lets a rebalance proceed
// (BlockRebalanceOnPoll), so a graceful handover resumes exactly after
// the last record it reported.
func runMember(raw string) int {
	var spec memberSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "member spec:", err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e memberEvent) {
		mu.Lock()
		defer mu.Unlock()
		e.T = time.Now().UnixNano()
		_ = enc.Encode(e)
	}
	parts := func(m map[string][]int32) []int32 { return m[spec.Topic] }
	opts := []kgo.Opt{
		kgo.SeedBrokers(spec.Addr), kgo.ClientID(spec.Name),
		kgo.ConsumerGroup(spec.Group), kgo.ConsumeTopics(spec.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(memberEvent{Ev: "assigned", Ps: parts(m)})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(memberEvent{Ev: "revoked", Ps: parts(m)})
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(memberEvent{Ev: "lost", Ps: parts(m)})
		}),
	}
	switch spec.Balancer {
	case "range":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	case "roundrobin":
		opts = append(opts, kgo.Balancers(kgo.RoundRobinBalancer()))
	case "cooperative-sticky":
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	case "server-range":
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	case "server-uniform":
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	default:
		fmt.Fprintln(os.Stderr, "unknown balancer", spec.Balancer)
		return 2
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				emit(memberEvent{Ev: "error", P: p, S: err.Error()})
			}
		})
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			emit(memberEvent{Ev: "rec", P: r.Partition, O: r.Offset})
		})
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := cl.CommitRecords(cctx, recs...)
			cancel()
			if err != nil {
				emit(memberEvent{Ev: "error", S: "commit: " + err.Error()})
			} else {
				last := map[int32]int64{}
				for _, r := range recs {
					last[r.Partition] = r.Offset
				}
				for p, o := range last {
					emit(memberEvent{Ev: "commit", P: p, O: o})
				}
			}
		}
		cl.AllowRebalance()
	}
	cl.Close() // leaves the group
	return 0
}
