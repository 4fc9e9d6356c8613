package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// produceValues writes values to topic/0 one at a time and fails the
// test on an error.
func produceValues(t *testing.T, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}
		if err := cl.ProduceSync(testCtx(t, 30*time.Second), r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
}

// seqValues returns n values prefix-0..prefix-(n-1).
func seqValues(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

// producer is an acks=all producer to partition 0 of one topic.
func producer(t *testing.T, c *daemontest.Cluster, acks kgo.Acks, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.RequiredAcks(acks), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return clusterClient(t, c, opts...)
}

// TestReplicationNotEnoughReplicas: with two of three brokers down (their
// processes stopped, their metadata voters left running) an
// acks=all write fails with NOT_ENOUGH_REPLICAS and never appears, while
// acks=1 succeeds.
func TestReplicationNotEnoughReplicas(t *testing.T) {
	forEachStore(t, false, testReplicationNotEnoughReplicas)
}

func testReplicationNotEnoughReplicas(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "min-isr"
	createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	all := producer(t, c, kgo.AllISRAcks())
	produceValues(t, all, topic, "before")
	leader := waitLeader(t, c, topic, 0, 0)
	// Both followers stop; their metadata voters stay up, so the quorum
	// (three voters on these three brokers) can still shrink the ISR.
	var paused []*daemontest.Proc
	for _, p := range c.Brokers() {
		if p.NodeID() != leader {
			if err := p.PauseBroker(); err != nil {
				t.Fatal(err)
			}
			paused = append(paused, p)
		}
	}
	waitISR(t, c, topic, 0, 1)
	// Clients talk to the leader only: a stopped broker accepts
	// connections (the kernel does) but never answers.
	only := kgo.SeedBrokers(c.Broker(leader).Addr())
	strict := producer(t, c, kgo.AllISRAcks(), only, kgo.RecordDeliveryTimeout(3*time.Second), kgo.RecordRetries(2))
	err := strict.ProduceSync(testCtx(t, 20*time.Second), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR 1 < min.insync.replicas 2: got %v, want NOT_ENOUGH_REPLICAS", err)
	}
	one := producer(t, c, kgo.LeaderAck(), only)
	produceValues(t, one, topic, "acks1")
	for _, p := range paused {
		if err := p.Cont(); err != nil {
			t.Fatal(err)
		}
	}
	waitISR(t, c, topic, 0, 3)
	got := readAllValues(t, c, topic, 0)
	var values []string
	for _, o := range sortedKeys(got) {
		values = append(values, got[o])
	}
	if !slices.Equal(values, []string{"before", "acks1"}) {
		t.Errorf("log holds %q, want [before acks1] (the refused record must never appear)", values)
	}
}

func sortedKeys(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestReplicationPausedFollower: a SIGSTOPped follower leaves the ISR
// after replica.lag.time.max.ms while acks=all writes go on, and rejoins
// after SIGCONT.
func TestReplicationPausedFollower(t *testing.T) {
	forEachStore(t, false, testReplicationPausedFollower)
}

func testReplicationPausedFollower(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "paused"
	createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	leader := waitLeader(t, c, topic, 0, 0)
	var follower *daemontest.Proc
	for _, p := range c.Brokers() {
		if p.NodeID() != leader {
			follower = p
			break
		}
	}
	all := producer(t, c, kgo.AllISRAcks())
	produceValues(t, all, topic, seqValues("a", 20)...)
	if err := follower.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	errc := make(chan error, 1)
	go func() { // writes continue while the follower is paused
		n := 0
		for ctx.Err() == nil {
			r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("b-%04d", n))}
			if err := all.ProduceSync(ctx, r).FirstErr(); err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
			n++
			time.Sleep(20 * time.Millisecond)
		}
		errc <- nil
	}()
	isr := waitISR(t, c, topic, 0, 2)
	if slices.Contains(isr, follower.NodeID()) {
		t.Fatalf("ISR %v still holds the paused follower %d", isr, follower.NodeID())
	}
	if err := follower.Cont(); err != nil {
		t.Fatal(err)
	}
	waitISR(t, c, topic, 0, 3)
	stop()
	if err := <-errc; err != nil {
		t.Fatalf("acks=all write failed while one follower was paused: %v", err)
	}
}

// logBytes concatenates a partition replica's segment files.
func logBytes(t *testing.T, p *daemontest.Proc, topic string, part int32) []byte {
	t.Helper()
	dir := filepath.Join(p.DataDir(), fmt.Sprintf("%s-%d", topic, part))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// stopAllAndCompare stops every broker cleanly and checks that the
// replicas' log files of topic/0 are byte-for-byte identical.
func stopAllAndCompare(t *testing.T, c *daemontest.Cluster, topic string, replicas []int32) {
	t.Helper()
	for _, p := range c.Brokers() {
		if err := p.Stop(); err != nil {
			t.Logf("stop broker %d: %v", p.NodeID(), err)
		}
	}
	ref := logBytes(t, c.Broker(replicas[0]), topic, 0)
	if len(ref) == 0 {
		t.Fatalf("replica %d has an empty log", replicas[0])
	}
	for _, id := range replicas[1:] {
		if got := logBytes(t, c.Broker(id), topic, 0); !bytes.Equal(got, ref) {
			t.Errorf("replica %d's log (%d bytes) differs from replica %d's (%d bytes)", id, len(got), replicas[0], len(ref))
		}
	}
}

// TestReplicationKIP101RestartThenLeaderDies is KIP-101's first scenario:
// a follower restarts and the leader dies right after; the logs must end
// identical, and every acknowledged write must survive.
func TestReplicationKIP101RestartThenLeaderDies(t *testing.T) {
	forEachStore(t, false, testReplicationKIP101RestartThenLeaderDies)
}

func testReplicationKIP101RestartThenLeaderDies(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "kip101a"
	createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	all := producer(t, c, kgo.AllISRAcks())
	produceValues(t, all, topic, seqValues("a", 50)...)
	leader := waitLeader(t, c, topic, 0, 0)
	var follower *daemontest.Proc
	for _, p := range c.Brokers() {
		if p.NodeID() != leader {
			follower = p
			break
		}
	}
	follower.Kill9()
	follower.Restart(t)
	c.Broker(leader).Kill9()
	waitLeader(t, c, topic, 0, leader)
	produceValues(t, all, topic, seqValues("b", 50)...)
	c.Broker(leader).Restart(t)
	waitISR(t, c, topic, 0, 3)
	got := readAllValues(t, c, topic, 0)
	want := append(seqValues("a", 50), seqValues("b", 50)...)
	var values []string
	for _, o := range sortedKeys(got) {
		values = append(values, got[o])
	}
	if !slices.Equal(values, want) {
		t.Errorf("log holds %d values, want the %d acknowledged ones in order", len(values), len(want))
	}
	stopAllAndCompare(t, c, topic, []int32{1, 2, 3})
}

// TestReplicationKIP101LostTail is KIP-101's second scenario: both
// replicas go down and the former leader comes back having lost the
// unflushed tail of its log; after the other replica led a new epoch and
// took writes, the logs must end identical (the former leader truncates
// to where the epochs diverge, not to its high watermark).
func TestReplicationKIP101LostTail(t *testing.T) {
	forEachStore(t, false, testReplicationKIP101LostTail)
}

func testReplicationKIP101LostTail(t *testing.T, store string) {
	c := startStoreCluster(t, store, 3, nil)
	const topic = "kip101b"
	createReplicated(t, c, topic, 1, 2, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	all := producer(t, c, kgo.AllISRAcks())
	produceValues(t, all, topic, seqValues("a", 40)...)
	adm := clusterAdmin(t, c)
	st, err := partitionState(t, adm, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := st.Leader
	other := st.Replicas[0]
	if other == leader {
		other = st.Replicas[1]
	}
	c.Broker(other).Kill9()
	c.Broker(leader).Kill9()
	// The former leader loses the last part of its log, as after a power
	// failure with the tail unflushed: cut its last segment in half.
	dir := filepath.Join(c.Broker(leader).DataDir(), topic+"-0")
	ents, _ := os.ReadDir(dir)
	var last string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			last = filepath.Join(dir, e.Name())
		}
	}
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	c.Broker(other).Restart(t)
	waitLeader(t, c, topic, 0, leader)
	produceValues(t, all, topic, seqValues("b", 20)...)
	c.Broker(leader).Restart(t)
	waitISR(t, c, topic, 0, 2)
	produceValues(t, all, topic, seqValues("c", 5)...)
	stopAllAndCompare(t, c, topic, []int32{leader, other})
}
