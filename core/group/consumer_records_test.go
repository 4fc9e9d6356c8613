package group

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848Log drives a coordinator and keeps every record it appends, as
// the broker does: records are applied right after each step.
type kip848Log struct {
	c    *Coordinator
	log  []Record
	last Output
}

func (l *kip848Log) run(out Output) {
	l.log, l.last = append(l.log, out.Records...), out
	l.c.Apply(at(0), out.Records)
}

func (l *kip848Log) hb(ms int, member, instance string, epoch int32, owned []int32, id [16]byte, subscribe ...string) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", member, epoch
	if instance != "" {
		r.InstanceID = &instance
	}
	if epoch == 0 {
		r.RebalanceTimeoutMillis = 5000
		r.SubscribedTopicNames = subscribe
	}
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: id, Partitions: owned}}
	}
	resp, out := l.c.ConsumerGroupHeartbeat(context.Background(), at(ms), Client{ID: member}, r)
	l.run(out)
	return resp
}

// replayed loads the log into a fresh coordinator, as a broker restart
// does.
func (l *kip848Log) replayed(t *testing.T, tp fakeTopics) *Coordinator {
	t.Helper()
	c := testCoordinator(tp)
	for _, r := range l.log {
		if err := c.Replay(at(0), r.Key, r.Value); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	return c
}

func describe848(c *Coordinator) kmsg.ConsumerGroupDescribeResponseGroup {
	return c.ConsumerGroupDescribe(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}).Groups[0]
}

// A KIP-848 group rebuilt from __consumer_offsets has the same epochs,
// targets and assignments: members keep heartbeating at their epoch and
// nothing moves (no rejoin storm after a broker restart).
func TestKIP848StateSurvivesReplay(t *testing.T) {
	tp := topics("t", 4)
	id := tp["t"].ID
	l := &kip848Log{c: testCoordinator(tp)}
	l.hb(0, "a", "", 0, []int32{}, id, "t")
	l.hb(10, "b", "inst-b", 0, []int32{}, id, "t")
	l.hb(20, "a", "", 1, []int32{0, 1, 2, 3}, id)
	l.hb(30, "a", "", 1, []int32{0, 2}, id)
	l.hb(40, "b", "inst-b", 2, []int32{}, id)
	l.hb(50, "b", "inst-b", 2, []int32{1, 3}, id)
	before := describe848(l.c)
	if before.State != StateStable || before.Epoch != 2 {
		t.Fatalf("before: %s at epoch %d", before.State, before.Epoch)
	}

	// Unchanged state writes nothing.
	l.hb(60, "a", "", 2, nil, id)
	if len(l.last.Records) != 0 {
		t.Fatalf("a plain heartbeat wrote %d records", len(l.last.Records))
	}

	c2 := l.replayed(t, tp)
	after := describe848(c2)
	if after.State != before.State || after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || after.AssignorName != before.AssignorName {
		t.Fatalf("after replay: %s epoch %d/%d %s, want %s epoch %d/%d %s", after.State, after.Epoch, after.AssignmentEpoch, after.AssignorName,
			before.State, before.Epoch, before.AssignmentEpoch, before.AssignorName)
	}
	for i, m := range after.Members {
		b := before.Members[i]
		if m.MemberID != b.MemberID || m.MemberEpoch != b.MemberEpoch || !slices.Equal(m.SubscribedTopics, b.SubscribedTopics) ||
			!slices.Equal(m.Assignment.TopicPartitions[0].Partitions, b.Assignment.TopicPartitions[0].Partitions) ||
			!slices.Equal(m.TargetAssignment.TopicPartitions[0].Partitions, b.TargetAssignment.TopicPartitions[0].Partitions) ||
			(m.InstanceID == nil) != (b.InstanceID == nil) {
			t.Errorf("member %d after replay %+v, before %+v", i, m, b)
		}
	}
	l2 := &kip848Log{c: c2}
	for _, m := range []string{"a", "b"} {
		r := l2.hb(100, m, "", 2, nil, id)
		if r.ErrorCode != 0 || r.MemberEpoch != 2 {
			t.Errorf("%s heartbeat after replay: %v epoch %d", m, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
		}
	}
	if len(l2.log) != 0 {
		t.Errorf("heartbeats after replay wrote %d records; the replayed state should match the log", len(l2.log))
	}
	if g := describe848(c2); g.Epoch != 2 {
		t.Errorf("group epoch moved to %d after replay", g.Epoch)
	}
}

// KIP-848: a static member leaving with epoch -2 keeps its assignment
// until its session times out; its instance rejoining under a new member
// ID gets the same partitions at the same epoch, with no new group epoch.
// If it does not come back, its partitions go to the others on expiry.
func TestKIP848StaticLeaveHoldsAssignment(t *testing.T) {
	tp := topics("t", 2)
	id := tp["t"].ID
	l := &kip848Log{c: testCoordinator(tp)}
	l.hb(0, "a", "", 0, []int32{}, id, "t")
	l.hb(0, "s1", "static", 0, []int32{}, id, "t")
	l.hb(10, "a", "", 1, []int32{0, 1}, id)
	l.hb(20, "a", "", 1, []int32{0}, id)
	l.hb(30, "s1", "static", 2, []int32{}, id)
	if r := l.hb(40, "s1", "static", 2, []int32{1}, id); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("static member settled: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := l.hb(50, "s1", "static", -2, nil, id); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := l.hb(60, "a", "", 2, []int32{0}, id); !slices.Equal(assigned(r), []int32{0}) && r.Assignment != nil {
		t.Fatalf("a got %v while the static member is away", assigned(r))
	}
	if g := describe848(l.c); g.Epoch != 2 || len(g.Members) != 2 {
		t.Fatalf("after static leave: epoch %d, %d members", g.Epoch, len(g.Members))
	}
	// The leave is in the log: a restart in between changes nothing.
	l = &kip848Log{c: l.replayed(t, tp)}
	if r := l.hb(70, "a", "", 2, nil, id); r.ErrorCode != 0 {
		t.Fatalf("a after replay: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := l.hb(100, "s2", "static", 0, []int32{}, id, "t")
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || !slices.Equal(assigned(r), []int32{1}) {
		t.Fatalf("static rejoin: %v epoch %d assignment %v, want epoch 2 with [1]", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, assigned(r))
	}
	if g := describe848(l.c); g.Epoch != 2 || len(g.Members) != 2 {
		t.Fatalf("after static rejoin: epoch %d, %d members (no rebalance expected)", g.Epoch, len(g.Members))
	}
	if r := l.hb(110, "s1", "static", 2, nil, id); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("old static member ID: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(r.ErrorCode))
	}

	// Gone for good: after the session timeout a gets everything.
	l.hb(120, "s2", "static", -2, nil, id)
	for ms := 200; ms <= 1300; ms += 200 {
		l.hb(ms, "a", "", 2, []int32{0}, id)
	}
	l.run(l.c.Tick(at(1300)))
	if _, ok := l.c.group("g").consumer.members["s2"]; ok {
		t.Fatal("the left static member outlived its session")
	}
	a := l.hb(1400, "a", "", l.c.group("g").consumer.members["a"].epoch, []int32{0}, id)
	if !slices.Equal(assigned(a), []int32{0, 1}) {
		t.Fatalf("a after the static member expired: %v", assigned(a))
	}
	c3 := l.replayed(t, tp)
	if g := describe848(c3); len(g.Members) != 1 || g.Members[0].MemberID != "a" {
		t.Fatalf("replayed after expiry: %+v", g.Members)
	}
}

// Deleting an empty KIP-848 group tombstones all its records; replay
// does not bring it back, and its offsets go too.
func TestKIP848DeleteGroupTombstones(t *testing.T) {
	tp := topics("t", 1)
	id := tp["t"].ID
	l := &kip848Log{c: testCoordinator(tp)}
	l.hb(0, "a", "", 0, []int32{}, id, "t")
	commit := commitReq("g", map[int32]int64{0: 9})
	commit.MemberID, commit.Generation = "a", 1
	l.run(l.c.OffsetCommit(at(5), commit, nil))
	if got := fetchOne(l.c, "g", 0); got.Offset != 9 {
		t.Fatalf("commit by member: %+v", got)
	}
	l.hb(10, "a", "", -1, nil, id)
	if c := l.replayed(t, tp); c.group("g") == nil || c.group("g").consumer == nil || len(c.group("g").consumer.members) != 0 {
		t.Fatal("replayed empty KIP-848 group is missing or has members")
	}
	l.run(l.c.DeleteGroups(at(20), &kmsg.DeleteGroupsRequest{Groups: []string{"g"}}, nil))
	if code := l.last.Replies[0].Resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	if c := l.replayed(t, tp); c.group("g") != nil {
		t.Fatalf("deleted KIP-848 group came back: %+v", c.group("g"))
	}
}

// A classic group that turns KIP-848 and back replays as what it became.
func TestKIP848ReplayFollowsProtocolSwitch(t *testing.T) {
	tp := topics("t", 1)
	id := tp["t"].ID
	l := &kip848Log{c: testCoordinator(tp)}
	l.run(l.c.OffsetCommit(at(0), commitReq("g", map[int32]int64{0: 3}), nil))
	l.hb(10, "a", "", 0, []int32{}, id, "t")
	c := l.replayed(t, tp)
	if g := c.group("g"); g.consumer == nil || len(g.consumer.members) != 1 || g.offsets[tp0("t")].offset != 3 {
		t.Fatalf("replayed as %+v", g)
	}
	l.hb(20, "a", "", -1, nil, id)
	w := "join"
	l.run(l.c.JoinGroup(at(30), Client{ID: "x"}, joinReq("g", "", nil, "range"), w))
	c = l.replayed(t, tp)
	if g := c.group("g"); g.consumer != nil || g.offsets[tp0("t")].offset != 3 {
		t.Fatalf("after the switch back, replayed as consumer=%v offsets=%v", g.consumer != nil, g.offsets)
	}
}

func tp0(topic string) tp { return tp{topic, 0} }
