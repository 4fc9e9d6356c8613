package broker

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"go.uber.org/goleak"

	"github.com/vltava/vltava/core/group"
)

// slowGroupLoads makes every coordinator load in this process wait d
// before reading its partition, so that a test can ask a new coordinator
// while it loads.
func slowGroupLoads(t *testing.T, d time.Duration) {
	hook := func(int32) { time.Sleep(d) }
	groupLoadHook.Store(&hook)
	t.Cleanup(func() { groupLoadHook.Store(nil) })
}

// leadsOffsets reports whether broker id leads __consumer_offsets-0, as
// its group coordinator sees it.
func leadsOffsets(c *inProcCluster, id int32) bool {
	b := c.broker(id)
	if b == nil || b.topic(offsetsTopic) == nil || b.topic(offsetsTopic).partition(0) == nil {
		return false
	}
	_, ok := leadsAt(b.topic(offsetsTopic).partition(0))
	return ok
}

// offsetsISR is the ISR of __consumer_offsets-0 in the cluster's metadata.
func offsetsISR(ctx context.Context, adm *kadm.Client) []int32 {
	md, err := adm.Metadata(ctx, offsetsTopic)
	if err != nil {
		return nil
	}
	p, ok := md.Topics[offsetsTopic].Partitions[0]
	if !ok {
		return nil
	}
	return p.ISR
}

// fetchClients are two clients of one cluster: one speaking the latest
// OffsetFetch (v8+, groups batched) and one at most v7 (one group).
type fetchClients [2]*kgo.Client

func newFetchClients(c *inProcCluster) fetchClients {
	return fetchClients{c.client(), c.client(kgo.MaxVersions(offsetFetchV7()))}
}

// offsetFetchV7 is the latest versions but OffsetFetch at most v7.
func offsetFetchV7() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(9, 7)
	return v
}

// fetchCommitted asks broker id itself, once and without retries, for
// group's committed offset of t-0, by OffsetFetch v8+ (one group) and v7.
// It returns each answer's error code and offset.
func fetchCommitted(ctx context.Context, t *testing.T, fc fetchClients, id int32, grp string) [2]struct {
	code   int16
	offset int64
} {
	t.Helper()
	var out [2]struct {
		code   int16
		offset int64
	}
	v8 := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = grp
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	v8.Groups = append(v8.Groups, rg)
	v7 := kmsg.NewPtrOffsetFetchRequest()
	v7.Group = grp
	v7.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	for i, req := range []*kmsg.OffsetFetchRequest{v8, v7} {
		raw, err := fc[i].Broker(int(id)).Request(ctx, req)
		if err != nil {
			t.Fatalf("OffsetFetch to broker %d: %v", id, err)
		}
		resp := raw.(*kmsg.OffsetFetchResponse)
		out[i].offset = -1
		if (i == 0) != (resp.Version >= 8) {
			t.Fatalf("OffsetFetch sent as v%d", resp.Version)
		}
		if resp.Version >= 8 {
			g := resp.Groups[0]
			out[i].code = g.ErrorCode
			if len(g.Topics) == 1 && len(g.Topics[0].Partitions) == 1 {
				p := g.Topics[0].Partitions[0]
				out[i].offset, out[i].code = p.Offset, max(out[i].code, p.ErrorCode)
			}
			continue
		}
		out[i].code = resp.ErrorCode
		if len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			out[i].offset = resp.Topics[0].Partitions[0].Offset
		}
	}
	return out
}

// expectCommittedOn asks broker id for group's offset until it answers
// want, failing at once if it ever answers success without it: a
// coordinator that has just become leader of the group's partition must
// answer COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR), never -1,
// which makes a consumer reset.
func expectCommittedOn(ctx context.Context, t *testing.T, cl fetchClients, id int32, grp string, want int64) (retriable int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		done := true
		for i, a := range fetchCommitted(ctx, t, cl, id, grp) {
			v := []string{"v8+", "v7"}[i]
			switch a.code {
			case 0:
				if a.offset != want {
					t.Fatalf("broker %d answered OffsetFetch %s of %s with offset %d and no error, want %d or a retriable error", id, v, grp, a.offset, want)
				}
			case kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code:
				retriable++
				done = false
			default:
				t.Fatalf("broker %d answered OffsetFetch %s of %s with %v", id, v, grp, kerr.ErrorForCode(a.code))
			}
		}
		if done {
			return retriable
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d never served %s's offset", id, grp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 9, fault 3. Offsets committed through one coordinator are served
// by the next the moment its leadership is known, never as -1 (the
// consumer would reset); the coordinator that resigns drops the groups
// of the partition, timers included, and answers NOT_COORDINATOR; and a
// re-election replays from the log, not on top of stale state.
func TestGroupCoordinatorFollowsOffsetsLeadership(t *testing.T) {
	// Registered first, so it runs last: once the brokers and clients
	// are closed, none of their goroutines (the coordinator's timer and
	// loader among them) may remain.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	cl := c.client()
	adm := kadm.NewClient(cl)
	c.createAssigned(ctx, cl, offsetsTopic, [][]int32{{1, 2, 3}})
	c.createAssigned(ctx, cl, "t", [][]int32{{1, 2, 3}})
	// Both groups live in __consumer_offsets-0 (of the configured 50;
	// the topic created here has just that one).
	committed, live := groupInPartition0(t, "committed"), groupInPartition0(t, "live")

	commit := func(o int64) {
		t.Helper()
		resp, err := adm.CommitOffsets(ctx, committed, kadm.Offsets{"t": {0: {Topic: "t", Partition: 0, At: o, LeaderEpoch: -1}}})
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit %d: %v %v", o, err, resp.Error())
		}
	}
	commit(42)

	// A live classic member, so the coordinator holds session timers.
	member := c.client(kgo.ConsumerGroup(live), kgo.ConsumeTopics("t"), kgo.SessionTimeout(6*time.Second))
	c.waitFor("the live member has joined", func() bool {
		dg, err := adm.DescribeGroups(ctx, live)
		return err == nil && dg[live].State == "Stable" && len(dg[live].Members) == 1
	})
	_ = member

	slowGroupLoads(t, 1500*time.Millisecond)
	c.stop(1) // controlled shutdown: __consumer_offsets-0 moves to 2 or 3
	var next int32 = -1
	c.waitFor("a new offsets leader", func() bool {
		for _, id := range []int32{2, 3} {
			if leadsOffsets(c, id) {
				next = id
				return true
			}
		}
		return false
	})
	if n := expectCommittedOn(ctx, t, newFetchClients(c), next, committed, 42); n == 0 {
		t.Logf("broker %d had loaded before the first OffsetFetch (the load window was missed)", next)
	}

	// Broker 1 comes back; the preferred election gives it the partition
	// again, and broker next resigns.
	c.start(1)
	c.waitFor("broker 1 is back in the ISR", func() bool {
		return slices.Contains(offsetsISR(ctx, adm), 1)
	})
	commit(43) // through broker next, replicated to broker 1
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{offsetsTopic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[offsetsTopic][0]; r.Err != nil {
		t.Fatalf("preferred election: %v %s", r.Err, r.ErrMessage)
	}
	c.waitFor("broker 1 leads __consumer_offsets-0 again", func() bool { return leadsOffsets(c, 1) })
	fc := newFetchClients(c) // knows broker 1's new address
	cl2 := fc[0]
	expectCommittedOn(ctx, t, fc, 1, committed, 43)

	// The resigned coordinator holds nothing of the partition: no group,
	// no session timer, and it says so to clients.
	c.waitFor("broker "+itoa(next)+" has resigned", func() bool { return !leadsOffsets(c, next) })
	old := c.broker(next)
	var owned group.Ownership
	var deadline time.Time
	c.waitFor("the resigned coordinator unloaded the partition", func() bool {
		old.groups.mu.Lock()
		defer old.groups.mu.Unlock()
		owned, deadline = old.groups.c.Ownership(0), old.groups.c.NextDeadline()
		return !owned.Owned()
	})
	if !deadline.IsZero() && time.Until(deadline) < time.Minute {
		t.Errorf("the resigned coordinator still has a timer due at %v (a member session)", deadline)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version, dreq.Groups = 5, []string{live, committed}
	raw, err := cl2.Broker(int(next)).Request(ctx, dreq)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range raw.(*kmsg.DescribeGroupsResponse).Groups {
		if g.ErrorCode != kerr.NotCoordinator.Code {
			t.Errorf("resigned coordinator describes %s: %v state %q members %d, want NOT_COORDINATOR",
				g.Group, kerr.ErrorForCode(g.ErrorCode), g.State, len(g.Members))
		}
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	raw, err = cl2.Broker(int(next)).Request(ctx, lreq)
	if err != nil {
		t.Fatal(err)
	}
	if gs := raw.(*kmsg.ListGroupsResponse).Groups; len(gs) != 0 {
		t.Errorf("resigned coordinator lists %d groups", len(gs))
	}
	for _, a := range fetchCommitted(ctx, t, fc, next, committed) {
		if a.code != kerr.NotCoordinator.Code {
			t.Errorf("resigned coordinator answers OffsetFetch with %v offset %d, want NOT_COORDINATOR", kerr.ErrorForCode(a.code), a.offset)
		}
	}
}

func itoa(n int32) string { return string(rune('0' + n)) }

// groupInPartition0 is a group name starting with prefix that lives in
// __consumer_offsets partition 0 of 50.
func groupInPartition0(t *testing.T, prefix string) string {
	for i := 0; i < 100000; i++ {
		if g := prefix + "-" + strconv.Itoa(i); group.PartitionFor(g, 50) == 0 {
			return g
		}
	}
	t.Fatal("no group name in partition 0")
	return ""
}

// A coordinator that has read its partition to the log end serves it
// only once the high watermark has reached that end: until then its
// groups answer COORDINATOR_LOAD_IN_PROGRESS, so nothing a client sees
// can vanish if leadership moves again before the followers have it.
// (A single broker, whose high watermark the loader is made to see one
// behind, standing for a new leader not yet caught up by its followers.)
func TestGroupLoadWaitsForHighWatermark(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	adm := kadm.NewClient(cl)
	ctx := clusterCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	grp := groupInPartition0(t, "hw")
	resp, err := adm.CommitOffsets(ctx, grp, kadm.Offsets{"t": {0: {Topic: "t", Partition: 0, At: 7, LeaderEpoch: -1}}})
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	var release atomic.Bool
	behind := func(_ int32, hw int64) int64 {
		if release.Load() {
			return hw
		}
		return hw - 1
	}
	groupLoadHWHook.Store(&behind)
	t.Cleanup(func() { groupLoadHWHook.Store(nil) })
	h := b.groups
	h.mu.Lock()
	h.c.Unload(time.Now(), 0) // the next sync loads it again
	h.mu.Unlock()
	h.kick()

	fc := fetchClients{cl, testClient(t, b, kgo.MaxVersions(offsetFetchV7()))}
	loadingSince := time.Now()
	for time.Since(loadingSince) < 500*time.Millisecond {
		for _, a := range fetchCommitted(ctx, t, fc, b.cfg.NodeID, grp) {
			if a.code != kerr.CoordinatorLoadInProgress.Code {
				t.Fatalf("with the high watermark below the loaded end: %v offset %d, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(a.code), a.offset)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	release.Store(true)
	expectCommittedOn(ctx, t, fc, b.cfg.NodeID, grp, 7)
}
