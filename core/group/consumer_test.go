package group

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func hb(c *Coordinator, ms int, member string, epoch int32, owned []int32, topicID [16]byte, subscribe ...string) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", member, epoch
	if epoch == 0 {
		r.RebalanceTimeoutMillis = 5000
		r.SubscribedTopicNames = subscribe
	}
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID, Partitions: owned}}
	}
	resp, _ := c.ConsumerGroupHeartbeat(context.Background(), at(ms), Client{ID: member}, r)
	return resp
}

func assigned(r *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
	if r.Assignment == nil {
		return nil
	}
	var ps []int32
	for _, t := range r.Assignment.Topics {
		ps = append(ps, t.Partitions...)
	}
	slices.Sort(ps)
	return ps
}

// KIP-848: "the coordinator ... ensures that a partition is assigned to a
// new member only after it has been revoked by its previous owner."
func TestKIP848PartitionMovesOnlyAfterRevocation(t *testing.T) {
	tp := topics("t", 4)
	id := tp["t"].ID
	c := testCoordinator(tp)
	a := hb(c, 0, "a", 0, []int32{}, id, "t")
	if a.ErrorCode != 0 || !slices.Equal(assigned(a), []int32{0, 1, 2, 3}) || a.MemberEpoch != 1 {
		t.Fatalf("a joins: code %d epoch %d assignment %v", a.ErrorCode, a.MemberEpoch, assigned(a))
	}
	b := hb(c, 10, "b", 0, []int32{}, id, "t")
	if len(assigned(b)) != 0 || b.MemberEpoch != 2 {
		t.Fatalf("b got %v at epoch %d while a still owns everything", assigned(b), b.MemberEpoch)
	}
	// a is told to give up what b's target holds; its epoch stays.
	a2 := hb(c, 20, "a", 1, []int32{0, 1, 2, 3}, id)
	if !slices.Equal(assigned(a2), []int32{0, 2}) || a2.MemberEpoch != 1 {
		t.Fatalf("a must keep 0,2 at epoch 1, got %v at %d", assigned(a2), a2.MemberEpoch)
	}
	if b2 := hb(c, 30, "b", 2, []int32{}, id); len(assigned(b2)) != 0 {
		t.Fatalf("b got %v before a revoked", assigned(b2))
	}
	if st := c.group("g").state(); st != StateReconciling {
		t.Fatalf("state %s, want Reconciling", st)
	}
	a3 := hb(c, 40, "a", 1, []int32{0, 2}, id)
	if a3.MemberEpoch != 2 {
		t.Fatalf("a after revoking: epoch %d, want 2", a3.MemberEpoch)
	}
	b3 := hb(c, 50, "b", 2, []int32{}, id)
	if !slices.Equal(assigned(b3), []int32{1, 3}) {
		t.Fatalf("b after a revoked: %v, want [1 3]", assigned(b3))
	}
	hb(c, 60, "b", 2, []int32{1, 3}, id)
	if st := c.group("g").state(); st != StateStable {
		t.Fatalf("state %s, want Stable", st)
	}
}

// KIP-848 epochs: a heartbeat from an epoch the member is not at is
// FENCED_MEMBER_EPOCH; from an unknown member UNKNOWN_MEMBER_ID; a leave
// (epoch -1) frees the member's partitions for the others.
func TestKIP848EpochFencingAndLeave(t *testing.T) {
	tp := topics("t", 2)
	id := tp["t"].ID
	c := testCoordinator(tp)
	hb(c, 0, "a", 0, []int32{}, id, "t")
	cases := []struct {
		member string
		epoch  int32
		want   int16
	}{
		{"a", 5, kerr.FencedMemberEpoch.Code},
		{"nobody", 1, kerr.UnknownMemberID.Code},
		{"a", 1, 0},
	}
	for _, tc := range cases {
		if got := hb(c, 10, tc.member, tc.epoch, nil, id).ErrorCode; got != tc.want {
			t.Errorf("%s@%d: %v, want %v", tc.member, tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	hb(c, 20, "b", 0, []int32{}, id, "t")
	if r := hb(c, 30, "a", -1, nil, id); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: code %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	if b := hb(c, 40, "b", 2, []int32{}, id); !slices.Equal(assigned(b), []int32{0, 1}) {
		t.Fatalf("b after a left: %v at epoch %d", assigned(b), b.MemberEpoch)
	}
}

// KIP-848 subscriptions by regex: "the regular expression is matched
// against the whole topic name" (RE2 syntax); a bad one is
// INVALID_REGULAR_EXPRESSION.
func TestKIP848RegexSubscription(t *testing.T) {
	tp := topics("orders-eu", 1, "orders-us", 1, "payments", 1)
	c := testCoordinator(tp)
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, "g", "m", 1000
	re := "orders-.*"
	r.SubscribedTopicRegex = &re
	resp, _ := c.ConsumerGroupHeartbeat(context.Background(), at(0), Client{}, r)
	if resp.ErrorCode != 0 || len(resp.Assignment.Topics) != 2 {
		t.Fatalf("regex join: code %d assignment %+v", resp.ErrorCode, resp.Assignment)
	}
	bad := "orders-("
	r.MemberID, r.SubscribedTopicRegex = "n", &bad
	if resp, _ := c.ConsumerGroupHeartbeat(context.Background(), at(0), Client{}, r); resp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	unknown := "sticky-custom"
	r.SubscribedTopicRegex, r.ServerAssignor = &re, &unknown
	if resp, _ := c.ConsumerGroupHeartbeat(context.Background(), at(0), Client{}, r); resp.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Fatalf("unknown assignor: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// group.consumer.session.timeout.ms: a member that stops heartbeating is
// removed and its partitions go to the others.
func TestKIP848SessionExpiry(t *testing.T) {
	tp := topics("t", 2)
	id := tp["t"].ID
	c := testCoordinator(tp)
	hb(c, 0, "a", 0, []int32{}, id, "t")
	hb(c, 0, "b", 0, []int32{}, id, "t")
	for ms := 100; ms <= 1500; ms += 100 {
		hb(c, ms, "b", c.group("g").consumer.members["b"].epoch, nil, id)
	}
	c.Tick(at(1500))
	if _, ok := c.group("g").consumer.members["a"]; ok {
		t.Fatal("a outlived its session")
	}
	b := hb(c, 1600, "b", c.group("g").consumer.members["b"].epoch, []int32{}, id)
	if !slices.Equal(assigned(b), []int32{0, 1}) {
		t.Fatalf("b after a expired: %v", assigned(b))
	}
}
