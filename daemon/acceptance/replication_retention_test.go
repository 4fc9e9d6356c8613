package acceptance

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestReplicationRetentionBelowHighWatermark is fault 2 of issue 9:
// records timestamped two hours ago, past retention.ms, are written with
// acks=all while one follower is paused. The leader must not delete them
// before the follower has them (only segments wholly below the high
// watermark may go): otherwise the follower's fetch falls below the log
// start and it loops on OFFSET_OUT_OF_RANGE until it drops out of the ISR.
// Afterwards the ISR is whole, every write was acknowledged, and
// retention did delete the old records once they were replicated.
func TestReplicationRetentionBelowHighWatermark(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		// The pause must not end the follower's session or ISR membership:
		// only retention could then break replication.
		"broker.session.timeout.ms": "20000",
		"replica.lag.time.max.ms":   "20000",
	})
	const topic = "backfill"
	createReplicated(t, c, topic, 1, 3, map[string]string{
		"retention.ms":        "3600000",
		"segment.bytes":       "4096",
		"min.insync.replicas": "2",
	})
	leader := waitLeader(t, c, topic, 0, 0)
	var follower *daemontest.Proc
	for _, p := range c.Brokers() {
		if p.NodeID() != leader {
			follower = p
			break
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	all := producer(t, c, kgo.AllISRAcks(), kgo.ProducerBatchMaxBytes(2048), kgo.ProducerLinger(0))
	produce := func(prefix string, n int) error {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: 0, Timestamp: old, Value: fmt.Appendf(nil, "%s-%04d-%0200d", prefix, i, 0)}
			if err := all.ProduceSync(testCtx(t, 60*time.Second), r).FirstErr(); err != nil {
				return fmt.Errorf("produce %s-%d: %w", prefix, i, err)
			}
		}
		return nil
	}
	if err := produce("a", 40); err != nil {
		t.Fatal(err)
	}

	// Watch the leader: the first segment on its disk must never start
	// above the high watermark it answers afterwards (read in that order,
	// and the high watermark only grows, so a violation seen is real).
	adm := kadmFor(t, c.Broker(leader).Addr())
	dir := filepath.Join(c.Broker(leader).DataDir(), topic+"-0")
	ctx, stopWatch := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var violation error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			segs := segments(t, dir)
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err == nil && len(segs) > 0 {
				if end, ok := ends.Lookup(topic, 0); ok && end.Err == nil {
					if segs[0].base > end.Offset && violation == nil {
						violation = fmt.Errorf("leader's first segment starts at %d, above its high watermark %d", segs[0].base, end.Offset)
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stopWatch(); wg.Wait() })

	if err := follower.PauseBroker(); err != nil {
		t.Fatal(err)
	}
	paused := true
	t.Cleanup(func() {
		if paused {
			follower.Cont()
		}
	})
	errc := make(chan error, 1)
	go func() { errc <- produce("b", 40) }() // blocks on the paused follower
	time.Sleep(4 * time.Second)              // several retention checks
	if err := follower.Cont(); err != nil {
		t.Fatal(err)
	}
	paused = false
	if err := <-errc; err != nil {
		t.Fatalf("acks=all write with a briefly paused follower: %v", err)
	}
	// The follower catches up and stays in the ISR for a while.
	waitISR(t, c, topic, 0, 3)
	adm3 := clusterAdmin(t, c)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		st, err := partitionState(t, adm3, topic, 0)
		if err == nil && len(st.ISR) != 3 {
			t.Fatalf("ISR %v after the follower resumed, want all three", st.ISR)
		}
	}
	// Retention did run: once replicated, the old records went.
	waitUntil(t, 30*time.Second, "retention of the replicated records", func() error {
		segs := segments(t, dir)
		if len(segs) == 0 || segs[0].base < 80 {
			return fmt.Errorf("leader's segments %v", segs)
		}
		return nil
	})
	stopWatch()
	wg.Wait()
	if violation != nil {
		t.Fatal(violation)
	}
}
