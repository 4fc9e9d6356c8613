package acceptance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// uncleanSetup leaves topic/0 with every ISR member down and one
// out-of-sync replica up, and returns the brokers: the out-of-sync one
// and the stopped ISR members. Brokers are stopped with PauseBroker so
// the metadata quorum (a voter on each broker) stays up.
func uncleanSetup(t *testing.T, c *daemontest.Cluster, topic string, unclean bool) (out *daemontest.Proc, isr []*daemontest.Proc) {
	t.Helper()
	createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "1",
		"unclean.leader.election.enable": fmt.Sprint(unclean)})
	leader := waitLeader(t, c, topic, 0, 0)
	for _, p := range c.Brokers() {
		if p.NodeID() != leader && out == nil {
			out = p
		} else {
			isr = append(isr, p)
		}
	}
	if err := out.PauseBroker(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c, topic, 0, 2)
	w := producer(t, c, kgo.AllISRAcks(), kgo.SeedBrokers(c.Broker(leader).Addr()))
	produceValues(t, w, topic, seqValues("in-sync-only", 10)...)
	for _, p := range isr {
		if err := p.PauseBroker(); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Cont(); err != nil {
		t.Fatal(err)
	}
	return out, isr
}

// TestReplicationUncleanElectionOff: the out-of-sync replica does not
// take over; the partition stays offline until an ISR member returns.
func TestReplicationUncleanElectionOff(t *testing.T) {
	forEachStore(t, false, testReplicationUncleanElectionOff)
}

func testReplicationUncleanElectionOff(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "clean-only"
	out, isr := uncleanSetup(t, c, topic, false)
	adm := kadmFor(t, out.Addr())
	time.Sleep(4 * time.Second) // two session timeouts: time for a wrong election to show
	st, err := partitionState(t, adm, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader == out.NodeID() {
		t.Fatalf("out-of-sync replica %d became leader with unclean election off", out.NodeID())
	}
	for _, p := range isr {
		if err := p.Cont(); err != nil {
			t.Fatal(err)
		}
	}
	// A new election, seen by the broker that stayed up: a resumed broker
	// may answer Metadata from its view of before the pause for a moment.
	var leader int32
	waitUntil(t, 30*time.Second, "an ISR member elected again", func() error {
		now, err := partitionState(t, adm, topic, 0)
		if err != nil {
			return err
		}
		if now.Leader < 0 || now.Leader == out.NodeID() || now.LeaderEpoch <= st.LeaderEpoch {
			return fmt.Errorf("leader %d epoch %d (offline at epoch %d)", now.Leader, now.LeaderEpoch, st.LeaderEpoch)
		}
		leader = now.Leader
		return nil
	})
	t.Logf("ISR member %d leads again", leader)
	got := readAllValues(t, c, topic, 0)
	if len(got) != 10 {
		t.Errorf("log holds %d records, want the 10 written", len(got))
	}
}

// TestReplicationUncleanElectionOn: with the topic's
// unclean.leader.election.enable the out-of-sync replica leads and the
// possible loss is logged.
func TestReplicationUncleanElectionOn(t *testing.T) {
	forEachStore(t, false, testReplicationUncleanElectionOn)
}

func testReplicationUncleanElectionOn(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "unclean-ok"
	out, _ := uncleanSetup(t, c, topic, true)
	adm := kadmFor(t, out.Addr())
	waitUntil(t, 30*time.Second, "the out-of-sync replica to lead", func() error {
		st, err := partitionState(t, adm, topic, 0)
		if err != nil {
			return err
		}
		if st.Leader != out.NodeID() {
			return fmt.Errorf("leader %d", st.Leader)
		}
		return nil
	})
	found := false
	for _, p := range c.Brokers() {
		if strings.Contains(p.Log(), "unclean") {
			found = true
		}
	}
	if !found {
		t.Error("no broker logged the unclean election")
	}
}
