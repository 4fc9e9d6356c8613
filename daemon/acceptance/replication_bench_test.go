package acceptance

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationFigures prints the BENCHMARKS.md "Replication" figures;
// it runs only with VLTAVA_REPLICATION_BENCH=1 and asserts nothing about
// speed:
//
//	VLTAVA_REPLICATION_BENCH=1 go test ./daemon/acceptance -run TestReplicationFigures -v
func TestReplicationFigures(t *testing.T) {
	if os.Getenv("VLTAVA_REPLICATION_BENCH") == "" {
		t.Skip("set VLTAVA_REPLICATION_BENCH=1 to measure")
	}
	c := startCluster(t, 3, nil)
	createReplicated(t, c, "rf1", 1, 1, map[string]string{"min.insync.replicas": "1"})
	createReplicated(t, c, "rf3", 1, 3, map[string]string{"min.insync.replicas": "2"})
	const n, size = 50000, 1024
	value := make([]byte, size)
	throughput := func(topic string, acks kgo.Acks) float64 {
		cl := producer(t, c, acks, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
		var wg sync.WaitGroup
		start := time.Now()
		for range n {
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		return float64(n) / time.Since(start).Seconds()
	}
	for _, run := range []struct {
		topic string
		acks  kgo.Acks
		name  string
	}{{"rf1", kgo.AllISRAcks(), "RF=1 acks=all"}, {"rf3", kgo.AllISRAcks(), "RF=3 acks=all"}, {"rf3", kgo.LeaderAck(), "RF=3 acks=1"}} {
		r := throughput(run.topic, run.acks)
		t.Logf("throughput %-14s %8.0f records/s  %6.1f MB/s (%d x %d B)", run.name, r, r*size/1e6, n, size)
	}
	// Latency at a fixed rate: 5,000 records/s of 1 KiB (~5 MB/s).
	cl := producer(t, c, kgo.AllISRAcks(), kgo.DefaultProduceTopic("rf3"))
	const rate, total = 5000, 25000
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / rate)
	for range total {
		<-tick.C
		wg.Add(1)
		sent := time.Now()
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			d := time.Since(sent)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
			wg.Done()
		})
	}
	tick.Stop()
	wg.Wait()
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	t.Logf("latency RF=3 acks=all at %d records/s: p50 %v p99 %v p99.9 %v max %v", rate, q(0.5), q(0.99), q(0.999), lat[len(lat)-1])
	// Leader kill -9 to the first acknowledged write on the new leader.
	for i := range 3 {
		leader := waitLeader(t, c, "rf3", 0, 0)
		w := producer(t, c, kgo.AllISRAcks(), kgo.DefaultProduceTopic("rf3"))
		if err := w.ProduceSync(testCtx(t, 20*time.Second), &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.Broker(leader).Kill9()
		if err := w.ProduceSync(testCtx(t, 60*time.Second), &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		t.Logf("failover %d: leader %d kill -9 -> first acks=all write acknowledged in %v", i+1, leader, time.Since(start).Round(time.Millisecond))
		c.Broker(leader).Restart(t)
		waitISR(t, c, "rf3", 0, 3)
	}
}
