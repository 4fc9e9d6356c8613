package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupIn returns a group name that lives in __consumer_offsets partition
// p (of the default 50).
func groupIn(t *testing.T, p int32) string {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if g := fmt.Sprintf("g%d", i); PartitionFor(g, 50) == p {
			return g
		}
	}
	t.Fatalf("no group name for partition %d", p)
	return ""
}

// commitOne commits offset o of t-0 for a simple (memberless) group.
func commitOne(c *Coordinator, now time.Time, group string, o int64) *kmsg.OffsetCommitResponse {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, o
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	out := c.OffsetCommit(now, r, "commit")
	c.Apply(now, out.Records)
	return out.Replies[0].Resp.(*kmsg.OffsetCommitResponse)
}

// fetchGroups is an OffsetFetch v8 of t-0 for several groups.
func fetchGroups(c *Coordinator, groups ...string) map[string]kmsg.OffsetFetchResponseGroup {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	for _, g := range groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
		r.Groups = append(r.Groups, rg)
	}
	out := map[string]kmsg.OffsetFetchResponseGroup{}
	for _, g := range c.OffsetFetch(t0, r).Groups {
		out[g.Group] = g
	}
	return out
}

// Every group API answers for a group by the state of its partition:
// served once loaded, COORDINATOR_LOAD_IN_PROGRESS while loading,
// NOT_COORDINATOR when not led here. The multi-group APIs (OffsetFetch
// v8+, DescribeGroups, DeleteGroups, ConsumerGroupDescribe) decide per
// group.
func TestCoordinationPerGroup(t *testing.T) {
	c := New(func() Config { cfg := DefaultConfig(); cfg.Topics = topics("t", 1); return cfg }())
	loadedG, loadingG, otherG := groupIn(t, 1), groupIn(t, 2), groupIn(t, 3)
	l1, _ := c.BeginLoad(t0, 1, 5)
	if !c.FinishLoad(t0, l1) {
		t.Fatal("FinishLoad of a loading partition refused")
	}
	c.BeginLoad(t0, 2, 7) // still loading
	if got := commitOne(c, t0, loadedG, 42).Topics[0].Partitions[0].ErrorCode; got != 0 {
		t.Fatalf("commit to a loaded partition: %v", kerr.ErrorForCode(got))
	}
	want := map[string]int16{loadedG: 0, loadingG: kerr.CoordinatorLoadInProgress.Code, otherG: kerr.NotCoordinator.Code}

	fetched := fetchGroups(c, loadedG, loadingG, otherG)
	for g, code := range want {
		if fetched[g].ErrorCode != code {
			t.Errorf("OffsetFetch v8 %s: %v, want %v", g, kerr.ErrorForCode(fetched[g].ErrorCode), kerr.ErrorForCode(code))
		}
	}
	if p := fetched[loadedG].Topics[0].Partitions[0]; p.Offset != 42 {
		t.Errorf("OffsetFetch of the loaded group: offset %d, want 42", p.Offset)
	}
	for g, code := range want {
		if got := commitOne(c, t0, g, 43).Topics[0].Partitions[0].ErrorCode; got != code {
			t.Errorf("OffsetCommit %s: %v, want %v", g, kerr.ErrorForCode(got), kerr.ErrorForCode(code))
		}
		old := kmsg.NewPtrOffsetFetchRequest()
		old.Version, old.Group = 1, g
		old.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		if got := c.OffsetFetch(t0, old).Topics[0].Partitions[0]; got.ErrorCode != code {
			t.Errorf("OffsetFetch v1 %s: partition error %v, want %v", g, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(code))
		}
		if code == 0 {
			continue
		}
		j := joinReq(g, "", nil, "range")
		if got := replyTo[*kmsg.JoinGroupResponse](t, c.JoinGroup(t0, Client{}, j, "j"), "j").ErrorCode; got != code {
			t.Errorf("JoinGroup %s: %v, want %v", g, kerr.ErrorForCode(got), kerr.ErrorForCode(code))
		}
		s := kmsg.NewPtrSyncGroupRequest()
		s.Group, s.MemberID = g, "m"
		if got := replyTo[*kmsg.SyncGroupResponse](t, c.SyncGroup(t0, s, "s"), "s").ErrorCode; got != code {
			t.Errorf("SyncGroup %s: %v", g, kerr.ErrorForCode(got))
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID = g, "m"
		if got := c.Heartbeat(t0, hb).ErrorCode; got != code {
			t.Errorf("Heartbeat %s: %v", g, kerr.ErrorForCode(got))
		}
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Group, lv.MemberID = g, "m"
		if got, _ := c.LeaveGroup(t0, lv); got.ErrorCode != code {
			t.Errorf("LeaveGroup %s: %v", g, kerr.ErrorForCode(got.ErrorCode))
		}
		cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		cg.Group, cg.MemberID, cg.SubscribedTopicNames, cg.RebalanceTimeoutMillis = g, "m", []string{"t"}, 1000
		if got, _ := c.ConsumerGroupHeartbeat(t.Context(), t0, Client{}, cg); got.ErrorCode != code {
			t.Errorf("ConsumerGroupHeartbeat %s: %v", g, kerr.ErrorForCode(got.ErrorCode))
		}
		od := kmsg.NewPtrOffsetDeleteRequest()
		od.Group = g
		if got := c.OffsetDelete(t0, od, "d").Replies[0].Resp.(*kmsg.OffsetDeleteResponse).ErrorCode; got != code {
			t.Errorf("OffsetDelete %s: %v", g, kerr.ErrorForCode(got))
		}
	}
	groups := []string{loadedG, loadingG, otherG}
	for _, dg := range c.DescribeGroups(&kmsg.DescribeGroupsRequest{Version: 5, Groups: groups}).Groups {
		if dg.ErrorCode != want[dg.Group] {
			t.Errorf("DescribeGroups %s: %v, want %v", dg.Group, kerr.ErrorForCode(dg.ErrorCode), kerr.ErrorForCode(want[dg.Group]))
		}
	}
	for _, dg := range c.ConsumerGroupDescribe(&kmsg.ConsumerGroupDescribeRequest{Groups: groups}).Groups {
		if w := want[dg.Group]; w != 0 && dg.ErrorCode != w {
			t.Errorf("ConsumerGroupDescribe %s: %v, want %v", dg.Group, kerr.ErrorForCode(dg.ErrorCode), kerr.ErrorForCode(w))
		}
	}
	if got := c.ListGroups(kmsg.NewPtrListGroupsRequest()).ErrorCode; got != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("ListGroups while a partition loads: %v", kerr.ErrorForCode(got))
	}
	out := c.DeleteGroups(t0, &kmsg.DeleteGroupsRequest{Groups: groups}, "del")
	for _, dg := range out.Replies[0].Resp.(*kmsg.DeleteGroupsResponse).Groups {
		if dg.ErrorCode != want[dg.Group] {
			t.Errorf("DeleteGroups %s: %v, want %v", dg.Group, kerr.ErrorForCode(dg.ErrorCode), kerr.ErrorForCode(want[dg.Group]))
		}
	}
	for _, r := range out.Records {
		if r.Partition != 1 {
			t.Errorf("DeleteGroups wrote a tombstone to partition %d, which is not loaded", r.Partition)
		}
	}
}

// A load replays into state of its own and is installed only if its
// partition is still loading at its epoch; loaded members' sessions
// count from the install.
func TestLoadInstallsOnlyCurrentEpoch(t *testing.T) {
	src := testCoordinator(topics("t", 1))
	g := groupIn(t, 4)
	var log []Record
	commit := func(o int64) {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.Generation = 8, g, -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: o}}}}
		out := src.OffsetCommit(at(0), r, "w")
		src.Apply(at(0), out.Records)
		log = append(log, out.Records...)
	}
	commit(10)
	commit(11)
	ids := stableGroup(t, src, g, "")
	log = append(log, src.groupRecord(src.group(g), at(110)))

	c := New(src.cfg)
	stale, _ := c.BeginLoad(at(0), 4, 1)
	fresh, _ := c.BeginLoad(at(0), 4, 2) // re-elected before the first load finished
	for _, l := range []*Load{stale, fresh} {
		for _, r := range log {
			if err := l.Replay(at(0), r.Key, r.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fetchGroups(c, g)[g].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatal("served before the load finished")
	}
	if c.FinishLoad(at(5000), stale) {
		t.Fatal("a load of an older epoch was installed")
	}
	if !c.FinishLoad(at(5000), fresh) {
		t.Fatal("the current load was refused")
	}
	if o := c.Ownership(4); !o.Loaded || o.Epoch != 2 {
		t.Fatalf("ownership %v, want loaded at epoch 2", o)
	}
	got := fetchGroups(c, g)[g]
	if got.ErrorCode != 0 || got.Topics[0].Partitions[0].Offset != 11 {
		t.Fatalf("after the load: %v offset %d, want offset 11", kerr.ErrorForCode(got.ErrorCode), got.Topics[0].Partitions[0].Offset)
	}
	// Sessions start at the install (5 s), not at the replay (0): the
	// member's 1 s session has not expired at 5.5 s.
	c.Tick(at(5500))
	if m := c.group(g).classic.members[ids[0]]; m == nil {
		t.Fatal("a loaded member expired by the time spent loading")
	}
}

// Unload drops the partition's groups with their timers, answers
// waiting requests NOT_COORDINATOR, and leaves other partitions alone; a
// later load starts from the log alone.
func TestUnloadDropsGroupsAndTimers(t *testing.T) {
	c := testCoordinator(topics("t", 1))
	g, other := groupIn(t, 6), groupIn(t, 7)
	stableGroup(t, c, g, "")
	commitOne(c, at(0), other, 5)

	// A second member joins: the group rebalances and its join waits
	// for the first member to rejoin.
	out := c.JoinGroup(at(200), Client{}, joinReq(g, "", nil, "range"), "new")
	id := replyTo[*kmsg.JoinGroupResponse](t, out, "new").MemberID
	if out := c.JoinGroup(at(200), Client{}, joinReq(g, id, nil, "range"), "new"); hasReply(out, "new") {
		t.Fatal("the join did not wait for the rebalance")
	}

	before := c.NextDeadline()
	out = c.Unload(at(300), 6)
	if r := replyTo[*kmsg.JoinGroupResponse](t, out, "new"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("waiting join: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	if c.group(g) != nil {
		t.Fatal("the group of an unloaded partition is still held")
	}
	if c.Ownership(6).Owned() {
		t.Fatalf("partition 6 still %v", c.Ownership(6))
	}
	if next := c.NextDeadline(); !next.IsZero() && !next.After(before) {
		t.Fatalf("a deadline at %v remains after unloading (was %v)", next, before)
	}
	if out := c.Tick(at(100_000)); len(out.Records) != 0 || len(out.Replies) != 0 {
		t.Fatalf("timers of an unloaded group fired: %+v", out)
	}
	if got := fetchGroups(c, other)[other]; got.ErrorCode != 0 || got.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("another partition's group lost its offset: %+v", got)
	}
	if got := fetchGroups(c, g)[g].ErrorCode; got != kerr.NotCoordinator.Code {
		t.Fatalf("OffsetFetch after unload: %v", kerr.ErrorForCode(got))
	}
}
