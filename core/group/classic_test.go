package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableGroup builds a Stable classic group of the named members (joined
// with v9, KIP-394 round trip included) and returns their member IDs.
func stableGroup(t *testing.T, c *Coordinator, group string, instances ...string) []string {
	t.Helper()
	var ids []string
	for i, inst := range instances {
		var ip *string
		if inst != "" {
			ip = &inst
		}
		out := c.JoinGroup(at(0), Client{ID: "c"}, joinReq(group, "", ip, "range"), i)
		if ip == nil {
			resp := replyTo[*kmsg.JoinGroupResponse](t, out, i)
			if resp.ErrorCode != kerr.MemberIDRequired.Code {
				t.Fatalf("first join: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			c.JoinGroup(at(0), Client{ID: "c"}, joinReq(group, resp.MemberID, nil, "range"), i)
		} else if hasReply(out, i) {
			t.Fatalf("static join answered before the rebalance: %+v", out.Replies)
		}
	}
	out := c.Tick(at(100)) // the initial delay ends
	var leader string
	var gen int32
	for i := range instances {
		r := replyTo[*kmsg.JoinGroupResponse](t, out, i)
		ids = append(ids, r.MemberID)
		leader, gen = r.LeaderID, r.Generation
	}
	for i, id := range ids {
		s := kmsg.NewPtrSyncGroupRequest()
		s.Group, s.MemberID, s.Generation = group, id, gen
		if id == leader {
			for _, o := range ids {
				s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: o, MemberAssignment: []byte("a-" + o)})
			}
		}
		c.SyncGroup(at(110), s, 100+i)
	}
	if st := c.group(group).state(); st != StateStable {
		t.Fatalf("group is %s after syncs", st)
	}
	return ids
}

// KIP-394: "the broker will ... return MEMBER_ID_REQUIRED along with the
// generated member id" to a v4+ join without a member ID, and admit the
// member only when it rejoins with that ID.
func TestKIP394FirstJoinGetsMemberIDRequired(t *testing.T) {
	c := testCoordinator(topics())
	out := c.JoinGroup(at(0), Client{ID: "cl"}, joinReq("g", "", nil, "range"), "w")
	r := replyTo[*kmsg.JoinGroupResponse](t, out, "w")
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("code %d member %q", r.ErrorCode, r.MemberID)
	}
	if n := len(c.group("g").classic.members); n != 0 {
		t.Fatalf("%d members before the rejoin", n)
	}
	old := joinReq("g", "", nil, "range")
	old.Version = 3
	out = c.JoinGroup(at(0), Client{ID: "cl"}, old, "v3")
	if hasReply(out, "v3") {
		t.Fatal("a v3 join is admitted at once and waits for the rebalance")
	}
}

// "group.initial.rebalance.delay.ms: The amount of time the group
// coordinator will wait for more consumers to join a new group before
// performing the first rebalance."
func TestInitialRebalanceDelayWaitsForMoreMembers(t *testing.T) {
	c := testCoordinator(topics())
	joinNew(t, c, at(0), 1, "range")
	if out := c.Tick(at(50)); len(out.Replies) != 0 {
		t.Fatalf("rebalance completed inside the delay: %d replies", len(out.Replies))
	}
	joinNew(t, c, at(60), 2, "range")
	if out := c.Tick(at(120)); len(out.Replies) != 0 {
		t.Fatal("a new member must extend the delay")
	}
	out := c.Tick(at(160))
	a, b := replyTo[*kmsg.JoinGroupResponse](t, out, 1), replyTo[*kmsg.JoinGroupResponse](t, out, 2)
	if a.Generation != 1 || b.Generation != 1 || a.LeaderID != b.LeaderID {
		t.Fatalf("generations %d/%d leaders %s/%s", a.Generation, b.Generation, a.LeaderID, b.LeaderID)
	}
	leader := a
	if b.MemberID == b.LeaderID {
		leader = b
	}
	if len(leader.Members) != 2 {
		t.Fatalf("leader got %d members, want 2", len(leader.Members))
	}
}

// Protocol selection: "the coordinator ... selects the protocol which is
// supported by all members and has the most votes" (each member votes
// for its most preferred protocol the others support).
func TestProtocolSupportedByAllWithMostVotesWins(t *testing.T) {
	c := testCoordinator(topics())
	joinNew(t, c, at(0), 1, "range", "roundrobin", "sticky")
	joinNew(t, c, at(0), 2, "roundrobin", "range")
	joinNew(t, c, at(0), 3, "roundrobin", "range")
	out := c.Tick(at(100))
	if p := *replyTo[*kmsg.JoinGroupResponse](t, out, 1).Protocol; p != "roundrobin" {
		t.Fatalf("selected %q, want roundrobin", p)
	}
	bad := joinNew(t, c, at(200), 4, "sticky")
	if code := replyTo[*kmsg.JoinGroupResponse](t, bad, 4).ErrorCode; code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join with no common protocol: %v", kerr.ErrorForCode(code))
	}
}

// KIP-345: a static member that restarts rejoins with its instance ID and
// no member ID; "the group coordinator will ... not trigger a rebalance",
// and the old member ID is fenced.
func TestKIP345StaticRejoinDoesNotRebalance(t *testing.T) {
	c := testCoordinator(topics())
	ids := stableGroup(t, c, "g", "a", "b")
	inst := "a"
	out := c.JoinGroup(at(200), Client{}, joinReq("g", "", &inst, "range"), "re")
	r := replyTo[*kmsg.JoinGroupResponse](t, out, "re")
	if r.ErrorCode != 0 || r.Generation != 1 || r.MemberID == ids[0] {
		t.Fatalf("static rejoin: code %d gen %d member %s", r.ErrorCode, r.Generation, r.MemberID)
	}
	if st := c.group("g").state(); st != StateStable {
		t.Fatalf("group is %s, want Stable (no rebalance)", st)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", ids[0], 1, &inst
	if code := c.Heartbeat(at(210), hb).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member ID heartbeat: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation, s.InstanceID = "g", r.MemberID, 1, &inst
	sr := replyTo[*kmsg.SyncGroupResponse](t, c.SyncGroup(at(220), s, "s"), "s")
	if string(sr.MemberAssignment) != "a-"+ids[0] {
		t.Fatalf("static member got assignment %q, want its previous one", sr.MemberAssignment)
	}
}

// Kafka rebalances a Stable group on a static rejoin only if the group's
// selected protocol would change: a restarted client's new metadata (it
// owns nothing yet) does not count; a protocol the group cannot keep does.
func TestKIP345StaticRejoinWithNewMetadata(t *testing.T) {
	c := testCoordinator(topics())
	stableGroup(t, c, "g", "a", "b")
	inst := "a"
	req := joinReq("g", "", &inst, "range")
	req.Protocols[0].Metadata = []byte("owns nothing yet")
	r := replyTo[*kmsg.JoinGroupResponse](t, c.JoinGroup(at(200), Client{}, req, "re"), "re")
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("static rejoin with new metadata: code %d gen %d", r.ErrorCode, r.Generation)
	}
	if st := c.group("g").state(); st != StateStable {
		t.Fatalf("group is %s after a rejoin with new metadata, want Stable", st)
	}
	inst = "b"
	out := c.JoinGroup(at(300), Client{}, joinReq("g", "", &inst, "roundrobin", "range"), "rb")
	if st := c.group("g").state(); st != StateStable {
		t.Fatalf("group is %s after a rejoin that keeps the protocol, want Stable", st)
	}
	replyTo[*kmsg.JoinGroupResponse](t, out, "rb")
}

// Generation fencing: requests from another generation get
// ILLEGAL_GENERATION, unknown members UNKNOWN_MEMBER_ID, and members of a
// group that is rebalancing REBALANCE_IN_PROGRESS.
func TestGenerationFencing(t *testing.T) {
	c := testCoordinator(topics())
	ids := stableGroup(t, c, "g", "", "")
	hb := func(member string, gen int32) int16 {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation = "g", member, gen
		return c.Heartbeat(at(300), r).ErrorCode
	}
	cases := []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"current", ids[0], 1, 0},
		{"old generation", ids[0], 0, kerr.IllegalGeneration.Code},
		{"unknown member", "nobody", 1, kerr.UnknownMemberID.Code},
	}
	for _, tc := range cases {
		if got := hb(tc.member, tc.gen); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	// A third member joining starts a rebalance.
	out := c.JoinGroup(at(310), Client{}, joinReq("g", "", nil, "range"), "third")
	id := replyTo[*kmsg.JoinGroupResponse](t, out, "third").MemberID
	c.JoinGroup(at(310), Client{}, joinReq("g", id, nil, "range"), "third")
	if got := hb(ids[0], 1); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %v", kerr.ErrorForCode(got))
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "g", ids[0], 0
	if code := c.checkCommit(at(320), commit); code != kerr.IllegalGeneration.Code {
		t.Fatalf("commit from an old generation: %v", kerr.ErrorForCode(code))
	}
}

// session.timeout.ms: "If no heartbeats are received by the broker before
// the expiration of this session timeout, then the broker will remove
// this client from the group and initiate a rebalance."
func TestSessionTimeoutRemovesMember(t *testing.T) {
	c := testCoordinator(topics())
	ids := stableGroup(t, c, "g", "", "")
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = "g", ids[1], 1
	c.Heartbeat(at(900), r)
	c.Tick(at(1200)) // ids[0] last heard of at 110 with a 1000 ms session
	g := c.group("g").classic
	if _, ok := g.members[ids[0]]; ok || g.state != StatePreparingRebalance {
		t.Fatalf("after expiry: members %d state %s", len(g.members), g.state)
	}
	out := c.JoinGroup(at(1300), Client{}, joinReq("g", ids[1], nil, "range"), "rejoin")
	if resp := replyTo[*kmsg.JoinGroupResponse](t, out, "rejoin"); resp.Generation != 2 || len(resp.Members) != 1 {
		t.Fatalf("rejoin: gen %d members %d", resp.Generation, len(resp.Members))
	}
}

// LeaveGroup v3+ (KIP-345): members leave in a batch, by instance ID.
func TestBatchLeaveByInstanceID(t *testing.T) {
	c := testCoordinator(topics())
	ids := stableGroup(t, c, "g", "x", "y")
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version, r.Group = 3, "g"
	x, z := "x", "z"
	r.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: &x}, {MemberID: ids[1]}, {InstanceID: &z}}
	resp, _ := c.LeaveGroup(at(300), r)
	want := []int16{0, 0, kerr.UnknownMemberID.Code}
	for i, m := range resp.Members {
		if m.ErrorCode != want[i] {
			t.Errorf("member %d: %v, want %v", i, kerr.ErrorForCode(m.ErrorCode), kerr.ErrorForCode(want[i]))
		}
	}
	if st := c.group("g").state(); st != StateEmpty {
		t.Fatalf("group is %s after everyone left", st)
	}
}

// joinNew joins a dynamic member with the KIP-394 round trip; the reply to
// its second join goes to w.
func joinNew(t *testing.T, c *Coordinator, now time.Time, w Waiter, protocols ...string) Output {
	t.Helper()
	out := c.JoinGroup(now, Client{}, joinReq("g", "", nil, protocols...), w)
	id := replyTo[*kmsg.JoinGroupResponse](t, out, w).MemberID
	return c.JoinGroup(now, Client{}, joinReq("g", id, nil, protocols...), w)
}

// Replies are encoded by the caller after the coordinator has moved on,
// so they must not point into its state: a SyncGroup reply keeps the
// protocol it was sent with even when the group then empties (which
// clears the group's protocol). Under -race this was a data race between
// the response writer and the next step.
func TestRepliesDoNotAliasGroupState(t *testing.T) {
	c := testCoordinator(topics())
	ids := stableGroup(t, c, "g", "")
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = "g", ids[0], c.group("g").classic.generation
	sync := replyTo[*kmsg.SyncGroupResponse](t, c.SyncGroup(at(200), s, "s"), "s")
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Group, l.MemberID = "g", ids[0]
	c.LeaveGroup(at(300), l)
	if st := c.group("g").state(); st != StateEmpty {
		t.Fatalf("group is %s after its only member left", st)
	}
	if sync.Protocol == nil || *sync.Protocol != "range" {
		t.Fatalf("the SyncGroup reply's protocol changed after it was sent: %v", sync.Protocol)
	}
}
