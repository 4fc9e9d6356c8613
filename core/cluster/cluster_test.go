package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/plugins/sdk"
)

func controllerEpoch(t *testing.T, s sdk.MetadataStore) int64 {
	t.Helper()
	resp, err := s.Get(ctxT(t), &sdk.GetRequest{Key: controllerEpochKey})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(string(resp.Value), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// KIP-500: "one controller is active at a time"; every broker learns
// which one.
func TestOneControllerIsElected(t *testing.T) {
	c := localCluster(t, 3, nil)
	c.waitController()
	if got := controllerEpoch(t, c.stores[1]); got != 1 {
		t.Errorf("controller epoch %d after the first election, want 1", got)
	}
	for _, n := range c.running() {
		if got := len(n.Brokers()); got != 3 {
			t.Errorf("node %d sees %d brokers, want 3", n.cfg.NodeID, got)
		}
	}
}

// "When the controller's session ends another broker becomes controller
// with a higher epoch, and the deposed controller's writes fail."
func TestControllerFailoverFencesTheOldController(t *testing.T) {
	c := localCluster(t, 3, nil)
	old := c.waitController()
	oldNode := c.node(old)
	oldTerm := oldNode.snapshot().controller.version
	c.stop(old)
	next := c.waitController()
	if next == old {
		t.Fatalf("controller is still %d", next)
	}
	if got := controllerEpoch(t, c.stores[next]); got != 2 {
		t.Errorf("controller epoch %d after failover, want 2", got)
	}
	// A write conditioned on the old term, as the deposed controller's
	// writes are, fails.
	ctl := &controller{n: oldNode, term: term{version: oldTerm}}
	err := ctl.write(ctxT(t), proposal{tp: TopicPartition{"x", 0}, to: PartitionState{Leader: 1, ISR: []int32{1}}})
	if !errors.Is(err, sdk.ErrVersionMismatch) {
		t.Errorf("write of the deposed controller: %v, want a version mismatch", err)
	}
}

// CreateTopic: "leader = first replica, ISR = all replicas, leader epoch
// 0", placed with leaders spread over the brokers.
func TestCreateTopicPlacesAndEveryBrokerApplies(t *testing.T) {
	c := localCluster(t, 3, nil)
	n := c.node(1)
	top, err := n.CreateTopic(ctxT(t), "orders", 3, 3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for p := int32(0); p < 3; p++ {
		tp := TopicPartition{"orders", p}
		replicas := top.Assignment(p)
		st := c.partition(tp, "is applied", func(PartitionState, []int32) bool { return true })
		if st.Leader != replicas[0] || st.LeaderEpoch != 0 || !slices.Equal(st.ISR, replicas) {
			t.Errorf("%s: state %+v, replicas %v", tp, st, replicas)
		}
		leaders[st.Leader] = true
		for id := int32(1); id <= 3; id++ {
			want := "follower of " + strconv.Itoa(int(st.Leader)) + " e0"
			if id == st.Leader {
				want = "leader e0"
			}
			if got := c.rec(id).roles(tp); !cmp.Equal(got, []string{want}) {
				t.Errorf("broker %d saw %v for %s, want [%s]", id, got, tp, want)
			}
		}
	}
	if len(leaders) != 3 {
		t.Errorf("leaders %v: want one partition led by each broker", leaders)
	}
	if _, err := c.node(2).CreateTopic(ctxT(t), "orders", 1, 1, nil, nil); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := n.CreateTopic(ctxT(t), "big", 1, 4, nil, nil); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("rf 4 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	if _, err := n.CreateTopic(ctxT(t), "manual", -1, -1, [][]int32{{3, 1}, {9, 1}}, nil); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("assignment naming broker 9: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
	top, err = n.CreateTopic(ctxT(t), "manual", -1, -1, [][]int32{{3, 1}, {2, 1}}, map[string]string{"retention.ms": "5"})
	if err != nil {
		t.Fatal(err)
	}
	st := c.partition(TopicPartition{"manual", 1}, "is applied", func(PartitionState, []int32) bool { return true })
	if st.Leader != 2 || top.Configs["retention.ms"] != "5" {
		t.Errorf("manual assignment: state %+v topic %+v", st, top)
	}

	// CreatePartitions and DeleteTopic.
	if _, err := c.node(3).CreatePartitions(ctxT(t), "orders", 5, nil, false); err != nil {
		t.Fatal(err)
	}
	c.partition(TopicPartition{"orders", 4}, "is applied", func(_ PartitionState, r []int32) bool { return len(r) == 3 })
	if err := c.node(2).DeleteTopic(ctxT(t), "orders"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every broker was told orders is deleted", func() bool {
		for id := int32(1); id <= 3; id++ {
			if len(c.rec(id).lines("deleted orders")) != 1 {
				return false
			}
		}
		return true
	})
	list, err := c.stores[1].List(ctxT(t), &sdk.ListRequest{Prefix: partitionsPrefix + "orders/"})
	if err != nil || len(list.KVs) != 0 {
		t.Errorf("partition keys left after delete: %v %v", list, err)
	}
}

// "When a broker's session ends, the controller elects new leaders for
// its partitions from the ISR (first live ISR member in replica order)",
// bumping the leader epoch; dead brokers leave every ISR.
func TestLeaderElectedFromISRWhenBrokerGoes(t *testing.T) {
	c := localCluster(t, 3, nil)
	ctl := c.waitController()
	victim := int32(1)
	if ctl == victim {
		victim = 2
	}
	replicas := []int32{victim, 6 - victim - ctl, ctl} // victim leads; the non-controller survivor is next
	if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", -1, -1, [][]int32{replicas}, nil); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	c.partition(tp, "is led by the victim", func(st PartitionState, _ []int32) bool { return st.Leader == victim })
	c.stop(victim)
	st := c.partition(tp, "has a new leader", func(st PartitionState, _ []int32) bool { return st.Leader != victim })
	if st.Leader != replicas[1] || st.LeaderEpoch != 1 || !slices.Equal(st.ISR, replicas[1:]) {
		t.Errorf("after the leader left: %+v, want leader %d epoch 1 isr %v", st, replicas[1], replicas[1:])
	}
	// The broker that took over saw exactly: follower at epoch 0, leader at epoch 1.
	if got, want := c.rec(replicas[1]).roles(tp), []string{"follower of " + strconv.Itoa(int(victim)) + " e0", "leader e1"}; !cmp.Equal(got, want) {
		t.Errorf("new leader saw %v, want %v", got, want)
	}
	if got, want := c.rec(replicas[2]).roles(tp)[1:], []string{"follower of " + strconv.Itoa(int(replicas[1])) + " e1"}; !cmp.Equal(got, want) {
		t.Errorf("remaining follower saw %v, want %v after the first", got, want)
	}
}

// Unclean election off: "with every ISR member down and an out-of-sync
// replica up, the partition stays offline until an ISR member returns";
// on: "the out-of-sync replica leads".
func TestOfflineUntilAnISRMemberReturns(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run("unclean="+strconv.FormatBool(unclean), func(t *testing.T) {
			c := localCluster(t, 3, nil)
			ctl := c.waitController()
			others := []int32{}
			for id := int32(1); id <= 3; id++ {
				if id != ctl {
					others = append(others, id)
				}
			}
			a, b := others[0], others[1] // a leads, b is the out-of-sync replica
			configs := map[string]string{"unclean.leader.election.enable": strconv.FormatBool(unclean)}
			if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", -1, -1, [][]int32{{a, b}}, configs); err != nil {
				t.Fatal(err)
			}
			tp := TopicPartition{"t", 0}
			st := c.partition(tp, "is created", func(PartitionState, []int32) bool { return true })
			// The leader shrinks the ISR to itself (b fell behind).
			st, err := c.node(a).AlterISR(ctxT(t), "t", 0, st.LeaderEpoch, []int32{a}, st.Version)
			if err != nil {
				t.Fatal(err)
			}
			c.stop(a)
			if !unclean {
				st = c.partition(tp, "is offline", func(st PartitionState, _ []int32) bool { return st.Leader == NoLeader })
				if !slices.Equal(st.ISR, []int32{a}) || st.LeaderEpoch != 1 {
					t.Errorf("offline state %+v, want ISR [%d] epoch 1", st, a)
				}
				// It stays offline: no further write while b alone is up.
				rev := c.node(b).Revision()
				c.node(ctl).waitView(ctxT(t), func(v *view) bool { return v.rev >= rev })
				if st2, _, _ := c.node(b).Partition("t", 0); st2.Leader != NoLeader {
					t.Errorf("partition got leader %d from outside the ISR", st2.Leader)
				}
				c.start(a) // the ISR member returns
				st = c.partition(tp, "is led by the returning ISR member", func(st PartitionState, _ []int32) bool { return st.Leader == a })
				if st.LeaderEpoch != 2 {
					t.Errorf("leader epoch %d, want 2", st.LeaderEpoch)
				}
				return
			}
			st = c.partition(tp, "is led by the out-of-sync replica", func(st PartitionState, _ []int32) bool { return st.Leader == b })
			if !slices.Equal(st.ISR, []int32{b}) || st.LeaderEpoch != 1 {
				t.Errorf("unclean state %+v, want ISR [%d] epoch 1", st, b)
			}
		})
	}
}

// AlterPartition: a leader's ISR change is a compare-and-set that fails
// for a stale leader epoch or version and for ineligible replicas.
func TestAlterISRFencing(t *testing.T) {
	c := localCluster(t, 3, nil)
	ctl := c.waitController()
	if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", -1, -1, [][]int32{{1, 2, 3}}, nil); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	st := c.partition(tp, "is created", func(PartitionState, []int32) bool { return true })
	n1 := c.node(1)
	shrunk, err := n1.AlterISR(ctxT(t), "t", 0, 0, []int32{1, 2}, st.Version)
	if err != nil {
		t.Fatal(err)
	}
	if shrunk.PartitionEpoch != st.PartitionEpoch+1 || shrunk.Version <= st.Version {
		t.Errorf("shrink: %+v", shrunk)
	}
	for _, tc := range []struct {
		name    string
		node    int32
		epoch   int32
		isr     []int32
		version int64
		want    error
	}{
		{"a stale version is rejected", 1, 0, []int32{1}, st.Version, kerr.InvalidUpdateVersion},
		{"an older leader epoch is fenced", 1, -1, []int32{1}, shrunk.Version, kerr.FencedLeaderEpoch},
		{"a newer leader epoch is unknown", 1, 1, []int32{1}, shrunk.Version, kerr.UnknownLeaderEpoch},
		{"a follower can not change the ISR", 2, 0, []int32{1, 2}, shrunk.Version, kerr.NotLeaderForPartition},
		{"the ISR can not be empty of the leader", 1, 0, []int32{2}, shrunk.Version, kerr.IneligibleReplica},
		{"a broker that is not a replica can not join", 1, 0, []int32{1, 2, 4}, shrunk.Version, kerr.IneligibleReplica},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.node(tc.node).AlterISR(ctxT(t), "t", 0, tc.epoch, tc.isr, tc.version)
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// A leader deposed by an election is fenced by the epoch.
	c.stop(3)
	c.node(2).ShutDown(ctxT(t)) // moves nothing (1 leads); leaves
	c.stop(2)
	if _, err := n1.AlterISR(ctxT(t), "t", 0, 0, []int32{1, 2, 3}, shrunk.Version); !errors.Is(err, kerr.InvalidUpdateVersion) && !errors.Is(err, kerr.IneligibleReplica) {
		t.Errorf("adding dead brokers: %v", err)
	}
}

// "Controlled shutdown on SIGTERM moves leadership away before the
// broker stops": ShutDown returns when the broker leads nothing another
// ISR member could lead, and it is out of every ISR.
func TestControlledShutdownMovesLeaders(t *testing.T) {
	c := localCluster(t, 3, nil)
	ctl := c.waitController()
	if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", 6, 3, nil, nil); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 6; p++ {
		c.partition(TopicPartition{"t", p}, "is created", func(PartitionState, []int32) bool { return true })
	}
	for _, victim := range []int32{ctl, 1 + ctl%3} { // the controller itself, then another
		if err := c.node(victim).ShutDown(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		v := c.node(victim).snapshot()
		for tp, pv := range v.partitions() {
			if pv.state.Leader == victim {
				t.Errorf("broker %d still leads %s after controlled shutdown: %+v", victim, tp, pv.state)
			}
		}
		c.stop(victim)
		c.waitController()
	}
	// One broker is left: it leads everything, alone in every ISR.
	last := 6 - ctl - (1 + ctl%3)
	for p := int32(0); p < 6; p++ {
		c.partition(TopicPartition{"t", p}, "is led by the last broker alone in the ISR", func(st PartitionState, _ []int32) bool {
			return st.Leader == last && slices.Equal(st.ISR, []int32{last})
		})
	}
}

// "Preferred leader election (automatic with auto.leader.rebalance.enable,
// and the ElectLeaders API)" restores leadership to the first replica
// once it is back in the ISR.
func TestPreferredElectionRestoresLeaders(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run("auto="+strconv.FormatBool(auto), func(t *testing.T) {
			c := localCluster(t, 3, func(cfg *Config) {
				cfg.AutoLeaderRebalance = auto
				cfg.LeaderImbalanceCheckInterval = 50 * time.Millisecond
			})
			ctl := c.waitController()
			victim := 1 + ctl%3
			other := 6 - ctl - victim
			if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", -1, -1, [][]int32{{victim, other, ctl}}, nil); err != nil {
				t.Fatal(err)
			}
			tp := TopicPartition{"t", 0}
			c.partition(tp, "is created", func(PartitionState, []int32) bool { return true })
			c.stop(victim)
			st := c.partition(tp, "moved", func(st PartitionState, _ []int32) bool { return st.Leader == other })
			c.start(victim)
			if !auto {
				res := c.node(ctl).ElectLeaders(ctxT(t), true, tp)
				if !errors.Is(res[tp], kerr.PreferredLeaderNotAvailable) {
					t.Errorf("preferred replica outside the ISR: %v, want PREFERRED_LEADER_NOT_AVAILABLE", res[tp])
				}
			}
			// The leader lets the returning replica back into the ISR.
			if _, err := c.node(other).AlterISR(ctxT(t), "t", 0, st.LeaderEpoch, []int32{other, ctl, victim}, st.Version); err != nil {
				t.Fatal(err)
			}
			if !auto {
				c.partition(tp, "has the victim in the ISR", func(st PartitionState, _ []int32) bool { return slices.Contains(st.ISR, victim) })
				res := c.node(other).ElectLeaders(ctxT(t), true)
				if res[tp] != nil {
					t.Fatalf("ElectLeaders: %v", res[tp])
				}
			}
			st = c.partition(tp, "is led by the preferred replica", func(st PartitionState, _ []int32) bool { return st.Leader == victim })
			if st.LeaderEpoch != 2 {
				t.Errorf("leader epoch %d, want 2", st.LeaderEpoch)
			}
			if !auto {
				res := c.node(other).ElectLeaders(ctxT(t), true, tp, TopicPartition{"nope", 0})
				if !errors.Is(res[tp], kerr.ElectionNotNeeded) || !errors.Is(res[TopicPartition{"nope", 0}], kerr.UnknownTopicOrPartition) {
					t.Errorf("second election: %v", res)
				}
			}
		})
	}
}

// AlterPartitionReassignments: "add the new replicas, catch them up,
// switch, remove the old".
func TestReassignment(t *testing.T) {
	c := localCluster(t, 3, nil)
	ctl := c.waitController()
	if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", -1, -1, [][]int32{{1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	c.partition(tp, "is created", func(PartitionState, []int32) bool { return true })
	res := c.node(2).AlterReassignments(ctxT(t), map[TopicPartition][]int32{tp: {3, 2}})
	if res[tp] != nil {
		t.Fatal(res[tp])
	}
	st := c.partition(tp, "is being reassigned", func(st PartitionState, r []int32) bool { return st.Reassigning() })
	if !slices.Equal(st.Adding, []int32{3}) || !slices.Equal(st.Removing, []int32{1}) {
		t.Errorf("adding %v removing %v", st.Adding, st.Removing)
	}
	if got := c.node(3).Reassignments(); len(got) != 1 || !slices.Equal(got[0].Replicas, []int32{3, 2, 1}) {
		t.Errorf("Reassignments() = %+v", got)
	}
	// Broker 3 was told to follow.
	eventually(t, "broker 3 follows", func() bool {
		roles := c.rec(3).roles(tp)
		return len(roles) > 0 && roles[len(roles)-1] == "follower of 1 e0"
	})
	// The leader adds broker 3 once caught up; the controller finishes.
	if _, err := c.node(1).AlterISR(ctxT(t), "t", 0, st.LeaderEpoch, []int32{1, 2, 3}, st.Version); err != nil {
		t.Fatal(err)
	}
	st = c.partition(tp, "is reassigned", func(st PartitionState, r []int32) bool { return slices.Equal(r, []int32{3, 2}) && !st.Reassigning() })
	if st.Leader != 3 || !slices.Equal(st.ISR, []int32{2, 3}) || st.LeaderEpoch != 1 {
		t.Errorf("after reassignment %+v, want leader 3 isr [2 3] epoch 1", st)
	}
	roles := c.rec(1).roles(tp)
	if roles[len(roles)-1] != "none e1" {
		t.Errorf("removed broker 1 saw %v, want to end with none", roles)
	}
	if len(c.node(1).Reassignments()) != 0 {
		t.Errorf("reassignment still listed")
	}
	res = c.node(1).AlterReassignments(ctxT(t), map[TopicPartition][]int32{tp: nil})
	if !errors.Is(res[tp], kerr.NoReassignmentInProgress) {
		t.Errorf("cancel with none in progress: %v", res[tp])
	}
}

// A broker cut off from the store for longer than its session is fenced,
// loses its leaderships, then registers again.
func TestSessionExpiryFencesAndReregisters(t *testing.T) {
	base := openLocal(t)
	flaky := &flakyStore{MetadataStore: base}
	c := newTestCluster(t, map[int32]sdk.MetadataStore{1: base, 2: base, 3: flaky})
	for id := int32(1); id <= 3; id++ {
		c.start(id)
	}
	ctl := c.waitController()
	if ctl == 3 {
		c.stop(3) // make 3 a plain broker for this test
		c.start(3)
		ctl = c.waitController()
	}
	if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", -1, -1, [][]int32{{3, 1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	c.partition(tp, "is led by 3", func(st PartitionState, _ []int32) bool { return st.Leader == 3 })
	flaky.noKeepAlive.Store(true)
	st := c.partition(tp, "moved off 3", func(st PartitionState, _ []int32) bool { return st.Leader == 1 })
	if slices.Contains(st.ISR, 3) {
		t.Errorf("fenced broker still in ISR %v", st.ISR)
	}
	eventually(t, "broker 3 is fenced", func() bool { return c.node(3).Fenced() })
	flaky.noKeepAlive.Store(false)
	eventually(t, "broker 3 is registered and unfenced", func() bool {
		return !c.node(3).Fenced() && len(c.node(1).Brokers()) == 3
	})
	if got := c.rec(3).lines("fenced"); !cmp.Equal(got, []string{"fenced true", "fenced false"}) {
		t.Errorf("fence calls %v", got)
	}
}

// "After a store restart, re-list and re-watch": changes made while the
// watch was down reach the Applier.
func TestWatchResyncAfterStoreRestart(t *testing.T) {
	base := openLocal(t)
	flaky := &flakyStore{MetadataStore: base}
	c := newTestCluster(t, map[int32]sdk.MetadataStore{1: base, 2: flaky})
	c.start(1)
	c.start(2)
	c.waitController()
	if _, err := c.node(1).CreateTopic(ctxT(t), "gone", -1, -1, [][]int32{{1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	c.partition(TopicPartition{"gone", 0}, "is created", func(PartitionState, []int32) bool { return true })
	flaky.noWatch.Store(true)
	flaky.breakWatches()
	if err := c.node(1).DeleteTopic(ctxT(t), "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.node(1).CreateTopic(ctxT(t), "new", -1, -1, [][]int32{{2, 1}}, nil); err != nil {
		t.Fatal(err)
	}
	flaky.noWatch.Store(false)
	c.partition(TopicPartition{"new", 0}, "is seen after the resync", func(st PartitionState, _ []int32) bool { return st.Leader == 2 })
	if got := c.rec(2).lines("deleted gone"); len(got) != 1 {
		t.Errorf("deletion during the outage reported %d times", len(got))
	}
	// The watch works again after the resync.
	if _, err := c.node(1).CreateTopic(ctxT(t), "after", -1, -1, [][]int32{{2}}, nil); err != nil {
		t.Fatal(err)
	}
	c.partition(TopicPartition{"after", 0}, "is seen", func(PartitionState, []int32) bool { return true })
}

// Kafka refuses a duplicate broker registration: a new incarnation
// waits for the old one's session to end.
func TestStartWaitsForAnEarlierIncarnation(t *testing.T) {
	s := openLocal(t)
	ctx := ctxT(t)
	sess, err := s.GrantSession(ctx, &sdk.GrantSessionRequest{TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(BrokerInfo{ID: 1, Incarnation: "old"})
	if _, err := s.Put(ctx, &sdk.PutRequest{Key: brokerKey(1), Value: raw, ExpectVersion: sdk.MustNotExist, Session: sess.ID}); err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, map[int32]sdk.MetadataStore{1: s})
	n := c.start(1)
	resp, err := s.Get(ctx, &sdk.GetRequest{Key: brokerKey(1)})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := decodeBroker(resp.Value)
	if info.Incarnation != n.incarnation || resp.Session == sess.ID {
		t.Errorf("registration %+v (session %d), want the new incarnation %s", info, resp.Session, n.incarnation)
	}
	// A cancelled Start gives up cleanly.
	ctx2, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx2, s, Config{NodeID: 1, SessionTTL: time.Second, Logger: testLogger()}, nil); err == nil {
		t.Error("Start with a cancelled ctx succeeded while broker 1 is registered")
	}
}

// A topic written by the single-broker Vltava (no replicas, no partition
// keys) is given to the controller.
func TestLegacyTopicIsRepaired(t *testing.T) {
	s := openLocal(t)
	raw, _ := json.Marshal(TopicRecord{ID: "0123456789abcdef0123456789abcdef", Partitions: 2})
	if _, err := s.Put(ctxT(t), &sdk.PutRequest{Key: topicKey("old"), Value: raw, ExpectVersion: sdk.MustNotExist}); err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, map[int32]sdk.MetadataStore{7: s})
	c.start(7)
	c.waitController()
	for p := int32(0); p < 2; p++ {
		st := c.partition(TopicPartition{"old", p}, "is repaired", func(st PartitionState, r []int32) bool { return slices.Equal(r, []int32{7}) })
		if st.Leader != 7 {
			t.Errorf("partition %d leader %d", p, st.Leader)
		}
	}
}
