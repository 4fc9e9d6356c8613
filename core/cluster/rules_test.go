package cluster

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/twmb/franz-go/pkg/kerr"
)

// status builds a liveness: ids listed in live are up, in down dead, in
// shutting in controlled shutdown; unlisted ones are dead.
func status(live, shutting []int32) liveness {
	return func(id int32) brokerStatus {
		for _, l := range shutting {
			if l == id {
				return brokerShuttingDown
			}
		}
		for _, l := range live {
			if l == id {
				return brokerLive
			}
		}
		return brokerDead
	}
}

func st(leader, epoch int32, isr ...int32) PartitionState {
	return PartitionState{Leader: leader, LeaderEpoch: epoch, ISR: isr, PartitionEpoch: 10, Version: 99}
}

func TestDecidePartition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas []int32
		cur      PartitionState
		live     []int32
		shutting []int32
		unclean  bool
		changed  bool
		want     PartitionState // Version and PartitionEpoch checked separately
		kind     electionKind
		replace  []int32
	}{
		{
			name:     "the first live ISR member in replica order becomes leader when the leader's session ends",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 3, 1, 2), live: []int32{2, 3},
			changed: true, want: st(2, 5, 3, 2), kind: electClean,
		},
		{
			name:     "dead brokers are removed from the ISR without a leader change",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1, 2, 3), live: []int32{1, 2},
			changed: true, want: st(1, 4, 1, 2), kind: electNone,
		},
		{
			name:     "nothing changes while every replica is alive",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1, 2), live: []int32{1, 2, 3},
		},
		{
			name:     "with no live ISR member the partition goes offline and keeps its last ISR member",
			replicas: []int32{1, 2}, cur: st(1, 4, 1), live: []int32{2},
			changed: true, want: st(-1, 5, 1), kind: electOffline,
		},
		{
			name:     "ISR members that die together all stay in the ISR of the offline partition",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1, 2), live: []int32{3},
			changed: true, want: st(-1, 5, 1, 2), kind: electOffline,
		},
		{
			name:     "unclean.leader.election.enable elects the first live replica outside the ISR",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1), live: []int32{3, 2}, unclean: true,
			changed: true, want: st(2, 5, 2), kind: electUnclean,
		},
		{
			name:     "an offline partition stays offline when only an out-of-sync replica returns",
			replicas: []int32{1, 2}, cur: st(-1, 5, 1), live: []int32{2},
		},
		{
			name:     "an offline partition recovers when an ISR member returns",
			replicas: []int32{1, 2}, cur: st(-1, 5, 1), live: []int32{1, 2},
			changed: true, want: st(1, 6, 1), kind: electClean,
		},
		{
			name:     "an offline partition with unclean election enabled takes a returning out-of-sync replica",
			replicas: []int32{1, 2}, cur: st(-1, 5, 1), live: []int32{2}, unclean: true,
			changed: true, want: st(2, 6, 2), kind: electUnclean,
		},
		{
			name:     "controlled shutdown moves leadership to another ISR member and removes the broker from the ISR",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1, 2, 3), live: []int32{2, 3}, shutting: []int32{1},
			changed: true, want: st(2, 5, 2, 3), kind: electClean,
		},
		{
			name:     "a leader in controlled shutdown with no other ISR member keeps leading",
			replicas: []int32{1, 2}, cur: st(1, 4, 1), live: []int32{2}, shutting: []int32{1},
		},
		{
			name:     "a follower in controlled shutdown leaves the ISR",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1, 2, 3), live: []int32{1, 2}, shutting: []int32{3},
			changed: true, want: st(1, 4, 1, 2), kind: electNone,
		},
		{
			name:     "a broker in controlled shutdown is not elected while another ISR member is alive",
			replicas: []int32{1, 2, 3}, cur: st(1, 4, 1, 2, 3), live: []int32{3}, shutting: []int32{2},
			changed: true, want: st(3, 5, 3), kind: electClean,
		},
		{
			name:     "a reassignment completes once every target replica is in the ISR; the removed leader gives way",
			replicas: []int32{4, 5, 1, 2},
			cur:      PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 4, 5}, Adding: []int32{4, 5}, Removing: []int32{1, 2}},
			live:     []int32{1, 2, 4, 5},
			changed:  true, want: st(4, 5, 4, 5), kind: electReassign, replace: []int32{4, 5},
		},
		{
			name:     "a reassignment waits until the new replicas are in the ISR",
			replicas: []int32{4, 5, 1, 2},
			cur:      PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 4}, Adding: []int32{4, 5}, Removing: []int32{1, 2}},
			live:     []int32{1, 2, 4, 5},
		},
		{
			name:     "a reassignment that keeps the leader switches the replica list without a leader change",
			replicas: []int32{1, 3, 2},
			cur:      PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2, 3}, Adding: []int32{3}, Removing: []int32{2}},
			live:     []int32{1, 2, 3},
			changed:  true, want: st(1, 4, 1, 3), kind: electReassign, replace: []int32{1, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, changed := decidePartition(tc.replicas, tc.cur, status(tc.live, tc.shutting), tc.unclean)
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v (%+v)", changed, tc.changed, d.state)
			}
			if !changed {
				return
			}
			got := d.state
			if got.PartitionEpoch != tc.cur.PartitionEpoch+1 {
				t.Errorf("partition epoch %d, want %d", got.PartitionEpoch, tc.cur.PartitionEpoch+1)
			}
			if got.Version != tc.cur.Version {
				t.Errorf("version %d, want the read version %d (the CAS condition)", got.Version, tc.cur.Version)
			}
			got.PartitionEpoch, got.Version = tc.want.PartitionEpoch, tc.want.Version
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if d.kind != tc.kind {
				t.Errorf("kind %v, want %v", d.kind, tc.kind)
			}
			if diff := cmp.Diff(tc.replace, d.replicas); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreferredElection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cur      PartitionState
		live     []int32
		shutting []int32
		want     error
		leader   int32
	}{
		{"the preferred replica takes leadership back when it is in the ISR", st(2, 3, 2, 1), []int32{1, 2}, nil, nil, 1},
		{"election is not needed when the preferred replica leads", st(1, 3, 1, 2), []int32{1, 2}, nil, kerr.ElectionNotNeeded, 1},
		{"the preferred replica is not available outside the ISR", st(2, 3, 2), []int32{1, 2}, nil, kerr.PreferredLeaderNotAvailable, 2},
		{"the preferred replica is not available when dead", st(2, 3, 2, 1), []int32{2}, nil, kerr.PreferredLeaderNotAvailable, 2},
		{"the preferred replica is not available in controlled shutdown", st(2, 3, 2, 1), []int32{2}, []int32{1}, kerr.PreferredLeaderNotAvailable, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := preferredElection([]int32{1, 2}, tc.cur, status(tc.live, tc.shutting))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if next.Leader != tc.leader {
				t.Errorf("leader %d, want %d", next.Leader, tc.leader)
			}
			if err == nil && next.LeaderEpoch != tc.cur.LeaderEpoch+1 {
				t.Errorf("leader epoch %d, want %d", next.LeaderEpoch, tc.cur.LeaderEpoch+1)
			}
		})
	}
}

func TestUncleanElection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cur     PartitionState
		live    []int32
		want    error
		leader  int32
		unclean bool
		isr     []int32
	}{
		{"election is not needed while the partition has a leader", st(1, 3, 1), []int32{1, 2}, kerr.ElectionNotNeeded, 1, false, []int32{1}},
		{"a live ISR member is still preferred", st(-1, 3, 2, 3), []int32{3}, nil, 3, false, []int32{3}},
		{"the first live replica leads when no ISR member is alive", st(-1, 3, 1), []int32{3, 2}, nil, 2, true, []int32{2}},
		{"no live replica: eligible leaders not available", st(-1, 3, 1), nil, kerr.EligibleLeadersNotAvailable, -1, false, []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, unclean, err := uncleanElection([]int32{1, 2, 3}, tc.cur, status(tc.live, nil))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if next.Leader != tc.leader || unclean != tc.unclean || !cmp.Equal(next.ISR, tc.isr) {
				t.Errorf("leader %d unclean %v isr %v, want %d %v %v", next.Leader, unclean, next.ISR, tc.leader, tc.unclean, tc.isr)
			}
		})
	}
}

// "leader.imbalance.per.broker.percentage: the ratio of leader imbalance
// allowed per broker. The controller triggers a leader balance if it
// goes above this value per broker."
func TestImbalancedPerBrokerPercentage(t *testing.T) {
	parts := map[TopicPartition]partitionView{}
	// Broker 1 prefers 10 partitions and leads 9; broker 2 prefers 10 and leads 8.
	for p := range int32(10) {
		l1, l2 := int32(1), int32(2)
		if p == 0 {
			l1 = 2
		}
		if p < 2 {
			l2 = 1
		}
		parts[TopicPartition{"a", p}] = partitionView{replicas: []int32{1, 2}, state: st(l1, 1, 1, 2)}
		parts[TopicPartition{"b", p}] = partitionView{replicas: []int32{2, 1}, state: st(l2, 1, 1, 2)}
	}
	got := imbalanced(parts, status([]int32{1, 2}, nil), 10)
	want := []TopicPartition{{"b", 0}, {"b", 1}} // 10% is allowed, 20% is not
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// AlterPartition: "the new ISR contains at least one ineligible replica".
func TestCheckISR(t *testing.T) {
	cur := st(1, 3, 1, 2)
	live := status([]int32{1, 2, 3}, []int32{4})
	for _, tc := range []struct {
		name string
		isr  []int32
		ok   bool
	}{
		{"shrink to the leader", []int32{1}, true},
		{"expand with a live replica", []int32{1, 2, 3}, true},
		{"the ISR must contain the leader", []int32{2}, false},
		{"a broker that is not a replica can not join", []int32{1, 2, 5}, false},
		{"a dead replica can not join", []int32{1, 6}, false},
		{"a replica in controlled shutdown can not join", []int32{1, 4}, false},
		{"a broker can not be named twice", []int32{1, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkISR(tc.isr, cur, []int32{1, 2, 3, 4, 6}, live, 1)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, kerr.IneligibleReplica) {
				t.Errorf("err = %v, want INELIGIBLE_REPLICA", err)
			}
		})
	}
}

func TestReassignmentSets(t *testing.T) {
	next, merged, err := startReassignment([]int32{1, 2, 3}, st(1, 2, 1, 2, 3), []int32{4, 2, 5})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{4, 2, 5, 1, 3}, merged); diff != "" {
		t.Errorf("replicas: target first, then the ones being removed (-want +got):\n%s", diff)
	}
	if !cmp.Equal(next.Adding, []int32{4, 5}) || !cmp.Equal(next.Removing, []int32{1, 3}) {
		t.Errorf("adding %v removing %v, want [4 5] [1 3]", next.Adding, next.Removing)
	}
	back, orig, err := cancelReassignment(merged, next, status([]int32{1, 2, 3, 4, 5}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(orig, []int32{2, 1, 3}) || back.Reassigning() || back.Leader != 1 {
		t.Errorf("cancel: replicas %v state %+v", orig, back)
	}
	if _, _, err := cancelReassignment([]int32{1, 2}, st(1, 2, 1, 2), status(nil, nil)); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancel without a reassignment: %v", err)
	}
}

// A broker that went away and registered again between two controller
// passes is treated like one that stayed away: "every leader change
// bumps leader_epoch and removes dead brokers from the ISR".
func TestPlanTreatsABouncedBrokerAsDead(t *testing.T) {
	v := newView()
	for id := int32(1); id <= 2; id++ {
		v.brokers[id] = brokerEntry{info: BrokerInfo{ID: id}, registered: 10}
	}
	v.topics["t"] = Topic{Name: "t", TopicRecord: TopicRecord{Partitions: 2, Replicas: [][]int32{{1, 2}, {1}}}}
	v.parts[TopicPartition{"t", 0}] = st(1, 3, 1, 2)
	v.parts[TopicPartition{"t", 1}] = st(1, 3, 1)
	if got := plan(v, nil, false, 1); len(got) != 0 {
		t.Fatalf("nothing bounced: %d proposals", len(got))
	}
	got := plan(v, map[int32]bool{1: true}, false, 1)
	if len(got) != 2 {
		t.Fatalf("proposals %+v, want two", got)
	}
	if p := got[0].to; p.Leader != 2 || p.LeaderEpoch != 4 || !cmp.Equal(p.ISR, []int32{2}) {
		t.Errorf("t-0: %+v, want leader 2 epoch 4 isr [2]", p)
	}
	if p := got[1].to; p.Leader != NoLeader || p.LeaderEpoch != 4 || !cmp.Equal(p.ISR, []int32{1}) {
		t.Errorf("t-1: %+v, want offline at epoch 4 with isr [1] (re-elected on the next pass)", p)
	}
}
