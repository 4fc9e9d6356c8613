package acceptance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplicationControllerKill9: killing the controller gives a new
// controller, and every partition a live leader, within seconds (the
// broker session timeout is 2s here; the wait is bounded at 30s).
func TestReplicationControllerKill9(t *testing.T) {
	forEachStore(t, false, testReplicationControllerKill9)
}

func testReplicationControllerKill9(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "ctrl"
	createReplicated(t, c, topic, 3, 3, nil)
	adm := clusterAdmin(t, c)
	md, err := adm.BrokerMetadata(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	old := md.Controller
	if old <= 0 {
		t.Fatalf("no controller: %d", old)
	}
	start := time.Now()
	c.Broker(old).Kill9()
	waitUntil(t, 30*time.Second, "a new controller", func() error {
		for _, p := range c.Brokers() {
			if !p.Running() {
				continue
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
			if err != nil {
				return err
			}
			md, err := kadm.NewClient(cl).BrokerMetadata(testCtx(t, 5*time.Second))
			cl.Close()
			if err != nil {
				return err
			}
			if md.Controller <= 0 || md.Controller == old {
				return fmt.Errorf("broker %d says the controller is %d", p.NodeID(), md.Controller)
			}
		}
		return nil
	})
	for p := range int32(3) {
		waitLeader(t, c, topic, p, old)
	}
	t.Logf("new controller and leaders %v after killing controller %d", time.Since(start).Round(time.Millisecond), old)
	produceValues(t, producer(t, c, kgo.AllISRAcks()), topic, "after")
}

// TestReplicationGroupCoordinatorFailover: a consumer group keeps
// consuming while the broker leading its coordinator partition is killed.
func TestReplicationGroupCoordinatorFailover(t *testing.T) {
	forEachStore(t, false, testReplicationGroupCoordinatorFailover)
}

func testReplicationGroupCoordinatorFailover(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic, group = "grouped", "failover-group"
	createReplicated(t, c, topic, 1, 3, nil)
	all := producer(t, c, kgo.AllISRAcks())
	produceValues(t, all, topic, seqValues("a", 100)...)
	cons := clusterClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond))
	seen := map[string]bool{}
	var mu sync.Mutex
	consume := func(until int) {
		ctx := testCtx(t, 60*time.Second)
		for {
			mu.Lock()
			n := len(seen)
			mu.Unlock()
			if n >= until {
				return
			}
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d distinct values, want %d", n, until)
			}
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)] = true
				mu.Unlock()
			})
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("commit: %v", err)
			}
		}
	}
	consume(100)
	// The coordinator is the leader of the group's __consumer_offsets
	// partition; kill it.
	adm := clusterAdmin(t, c)
	dg, err := adm.DescribeGroups(testCtx(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	coord := dg[group].Coordinator.NodeID
	if coord <= 0 {
		t.Fatalf("no coordinator for %s: %+v", group, dg[group])
	}
	t.Logf("killing coordinator %d", coord)
	c.Broker(coord).Kill9()
	produceValues(t, all, topic, seqValues("b", 100)...)
	consume(200)
	dg, err = adm.DescribeGroups(context.Background(), group)
	if err == nil && dg[group].Coordinator.NodeID == coord {
		t.Errorf("coordinator is still the killed broker %d", coord)
	}
}
