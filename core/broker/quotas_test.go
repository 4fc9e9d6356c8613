package broker

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/config"
)

func strp(s string) *string { return &s }

func TestClientQuotasAlterDescribe(t *testing.T) {
	b := testBroker(t)
	adm := testAdmin(t, b)
	ctx := ctxT(t)
	alice := kadm.ClientQuotaEntity{{Type: "user", Name: strp("alice")}}
	appDefault := kadm.ClientQuotaEntity{{Type: "user", Name: strp("alice")}, {Type: "client-id", Name: nil}}
	clientDefault := kadm.ClientQuotaEntity{{Type: "client-id", Name: nil}}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1e6}, {Key: "consumer_byte_rate", Value: 2e6}}},
		{Entity: appDefault, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 50}}},
		{Entity: clientDefault, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 3e6}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: strp("1.2.3.4")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "bogus_rate", Value: 1}}},
		{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -5}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		wantErr := i >= 3
		if gotErr := r.Err != nil; gotErr != wantErr {
			t.Errorf("entry %d (%v): err = %v, want error: %v", i, r.Entity, r.Err, wantErr)
		}
		if wantErr && !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("entry %d: err = %v, want INVALID_REQUEST", i, r.Err)
		}
	}

	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("described %d entities, want 3: %v", len(all), all)
	}
	// Exact user match, not strict: alice and alice+default client.
	got, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strp("alice"), MatchType: 0}})
	if err != nil || len(got) != 2 {
		t.Fatalf("user=alice: %v %v, want 2 entities", got, err)
	}
	// Strict: only the user-only entity, with both values.
	got, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strp("alice"), MatchType: 0}})
	if err != nil || len(got) != 1 || len(got[0].Values) != 2 {
		t.Fatalf("strict user=alice: %v %v", got, err)
	}
	// Default client-id match.
	got, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}})
	if err != nil || len(got) != 1 || got[0].Entity[0].Name != nil || got[0].Values[0].Value != 3e6 {
		t.Fatalf("strict client-id=<default>: %v %v", got, err)
	}

	// Remove one value, then the other: the entity disappears.
	for _, key := range []string{"producer_byte_rate", "consumer_byte_rate"} {
		if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: alice, Ops: []kadm.AlterClientQuotaOp{{Key: key, Remove: true}}}}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strp("alice"), MatchType: 0}})
	if len(got) != 0 {
		t.Errorf("alice's quotas after removing both: %v", got)
	}

	// The broker enforcing them follows the store.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if bound, _, ok := b.quotas.Resolve("producer_byte_rate", "bob", "any"); ok && bound == 3e6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client-id default quota never reached the enforcing manager")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProducerQuotaHoldsRate is the acceptance test: a producer
// limited to 5 MB/s is held there while an unlimited one on the same
// broker is not held to it. Rates are measured after the first window
// span, whose burst allowance Kafka also gives.
func TestProducerQuotaHoldsRate(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) {
		c.QuotaWindowNum = 3
		c.QuotaWindowSizeSeconds = 1
	})
	adm := testAdmin(t, b)
	ctx := ctxT(t)
	const limit = 5e6
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("limited")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: limit}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "quota"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, _, ok := b.quotas.Resolve("producer_byte_rate", "ANONYMOUS", "limited"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("quota not in force")
		}
	}

	value := []byte(strings.Repeat("q", 16<<10))
	run := func(client string, acked *atomic.Int64, stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		cl := testClient(t, b, kgo.ClientID(client), kgo.DefaultProduceTopic("quota"),
			kgo.ProducerLinger(0), kgo.MaxBufferedRecords(256), kgo.ProducerBatchCompression(kgo.NoCompression()))
		for {
			select {
			case <-stop:
				cl.Flush(context.Background())
				return
			default:
			}
			cl.Produce(context.Background(), &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
	}
	var limited, free atomic.Int64
	stop := make(chan struct{})
	d1, d2 := make(chan struct{}), make(chan struct{})
	go run("limited", &limited, stop, d1)
	go run("free", &free, stop, d2)
	defer func() { close(stop); <-d1; <-d2 }()

	time.Sleep(4 * time.Second) // past the first window span and its burst
	l0, f0, t0 := limited.Load(), free.Load(), time.Now()
	time.Sleep(6 * time.Second)
	l1, f1, elapsed := limited.Load(), free.Load(), time.Since(t0).Seconds()
	lr, fr := float64(l1-l0)/elapsed, float64(f1-f0)/elapsed
	t.Logf("limited %.2f MB/s (quota %.0f MB/s), unlimited %.2f MB/s", lr/1e6, limit/1e6, fr/1e6)
	// The quota counts request bytes, a little more than the record values
	// counted here; the client's own pauses can only lower its rate, so the
	// lower bound is looser than the upper one on a loaded machine.
	if lr > limit*1.1 || lr < limit*0.75 {
		t.Errorf("the limited producer ran at %.2f MB/s, want %.1f MB/s ±10%%", lr/1e6, limit/1e6)
	}
	if fr < 2*limit || math.IsNaN(fr) {
		t.Errorf("the unlimited producer ran at %.2f MB/s: held back along with the limited one", fr/1e6)
	}
}
