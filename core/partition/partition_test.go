package partition

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

func openTest(t *testing.T) *Partition {
	t.Helper()
	cfg, err := config.ResolveTopic(config.DefaultBroker(), nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := log.Open(filepath.Join(t.TempDir(), "t-0"), log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return New("t", 0, l, cfg)
}

func batch() []byte {
	return recordtest.Batch(record.CodecNone, recordtest.Rec{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000})
}

// step is one transition applied to a partition, and what must hold after.
type step struct {
	name    string
	do      func(p *Partition) error
	wantErr bool
	role    Role
	epoch   int32
}

func leader(epoch int32, isr ...int32) func(p *Partition) error {
	return func(p *Partition) error {
		p.LockTransitions()
		defer p.UnlockTransitions()
		_, err := p.BecomeLeaderLocked(1, View{Leader: 1, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: isr, Version: int64(epoch)}, time.Now())
		return err
	}
}

func follower(epoch int32) func(p *Partition) error {
	return func(p *Partition) error {
		p.LockTransitions()
		defer p.UnlockTransitions()
		_, err := p.BecomeFollowerLocked(View{Leader: 2, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Version: int64(epoch)})
		return err
	}
}

func none(epoch int32) func(p *Partition) error {
	return func(p *Partition) error {
		p.LockTransitions()
		defer p.UnlockTransitions()
		p.BecomeNoneLocked(View{Leader: -1, LeaderEpoch: epoch})
		return nil
	}
}

func fence(p *Partition) error {
	p.LockTransitions()
	defer p.UnlockTransitions()
	p.FenceLocked()
	return nil
}

func appendLeader(p *Partition) error {
	_, _, err := p.AppendAsLeader(batch(), time.Now(), nil)
	return err
}

func appendFollower(p *Partition) error { return p.AppendFetched(nil, 0, 0) }

func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"starts with no role", []step{
			{name: "append as leader", do: appendLeader, wantErr: true, role: None, epoch: 0},
			{name: "append as follower", do: appendFollower, wantErr: true, role: None, epoch: 0},
		}},
		{"lead, follow, lead again", []step{
			{name: "lead e1", do: leader(1, 1), role: Leader, epoch: 1},
			{name: "append", do: appendLeader, role: Leader, epoch: 1},
			{name: "follow e2", do: follower(2), role: Follower, epoch: 2},
			{name: "append as leader refused", do: appendLeader, wantErr: true, role: Follower, epoch: 2},
			{name: "follower append", do: appendFollower, role: Follower, epoch: 2},
			{name: "lead e3", do: leader(3, 1), role: Leader, epoch: 3},
			{name: "follower append refused", do: appendFollower, wantErr: true, role: Leader, epoch: 3},
		}},
		{"older epochs are refused", []step{
			{name: "lead e5", do: leader(5, 1), role: Leader, epoch: 5},
			{name: "lead e4", do: leader(4, 1), wantErr: true, role: Leader, epoch: 5},
			{name: "follow e4", do: follower(4), wantErr: true, role: Leader, epoch: 5},
			{name: "none e2 keeps the epoch", do: none(2), role: None, epoch: 5},
		}},
		{"fenced leader stops and leads again at the same epoch", []step{
			{name: "lead e1", do: leader(1, 1), role: Leader, epoch: 1},
			{name: "fence", do: fence, role: None, epoch: 1},
			{name: "append refused", do: appendLeader, wantErr: true, role: None, epoch: 1},
			{name: "lead e1 again", do: leader(1, 1), role: Leader, epoch: 1},
			{name: "append", do: appendLeader, role: Leader, epoch: 1},
		}},
		{"same epoch, new ISR stays leader", []step{
			{name: "lead e1", do: leader(1, 1, 2, 3), role: Leader, epoch: 1},
			{name: "lead e1 ISR 1", do: leader(1, 1), role: Leader, epoch: 1},
			{name: "append", do: appendLeader, role: Leader, epoch: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := openTest(t)
			for _, s := range tc.steps {
				err := s.do(p)
				if (err != nil) != s.wantErr {
					t.Fatalf("%s: err %v, want error %v", s.name, err, s.wantErr)
				}
				st := p.State()
				if st.Role != s.role || st.View.LeaderEpoch != s.epoch {
					t.Fatalf("%s: role %v epoch %d, want %v %d", s.name, st.Role, st.View.LeaderEpoch, s.role, s.epoch)
				}
			}
		})
	}
}

func TestLeaderAppendsUnderItsEpoch(t *testing.T) {
	p := openTest(t)
	if err := leader(7, 1)(p); err != nil {
		t.Fatal(err)
	}
	res, epoch, err := p.AppendAsLeader(batch(), time.Now(), nil)
	if err != nil || epoch != 7 {
		t.Fatalf("append: epoch %d err %v", epoch, err)
	}
	if e, end := p.Log().EndOffsetForEpoch(7); e != 7 || end != res.LastOffset+1 {
		t.Fatalf("epoch cache: epoch 7 ends at %d (%d), want %d", end, e, res.LastOffset+1)
	}
	// The ISR is the leader alone: the HW follows the log end.
	if hw := p.HighWatermark(); hw != res.LastOffset+1 {
		t.Fatalf("hw %d, want %d", hw, res.LastOffset+1)
	}
	// A failing check appends nothing.
	bad := errors.New("refused")
	if _, _, err := p.AppendAsLeader(batch(), time.Now(), func(Leading) error { return bad }); !errors.Is(err, bad) {
		t.Fatalf("check error: %v", err)
	}
	if end := p.Log().EndOffset(); end != res.LastOffset+1 {
		t.Fatalf("log end %d after a refused append", end)
	}
}

func TestHighWatermarkFollowsISR(t *testing.T) {
	p := openTest(t)
	if err := leader(1, 1, 2)(p); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := appendLeader(p); err != nil {
			t.Fatal(err)
		}
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("hw %d before the follower fetched, want 0", hw)
	}
	now := time.Now()
	for _, c := range []struct {
		offset int64
		want   int64
	}{{1, 1}, {3, 3}} {
		if div, err := p.ReplicaFetched(2, 1, c.offset, 1, now); err != nil || div != nil {
			t.Fatalf("fetch at %d: %v %v", c.offset, div, err)
		}
		if hw := p.HighWatermark(); hw != c.want {
			t.Fatalf("after a fetch at %d: hw %d, want %d", c.offset, hw, c.want)
		}
	}
	// A fetch sent for another epoch does not count.
	if _, err := p.ReplicaFetched(2, 0, 3, 1, now); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("fetch for epoch 0: %v", err)
	}
	// A follower that claims an epoch the leader never had diverges.
	div, err := p.ReplicaFetched(2, 1, 3, 4, now)
	if err != nil || div == nil {
		t.Fatalf("divergent fetch: %v %v", div, err)
	}
}

func TestISRShrinkCommits(t *testing.T) {
	p := openTest(t)
	if err := leader(1, 1, 2)(p); err != nil {
		t.Fatal(err)
	}
	if err := appendLeader(p); err != nil {
		t.Fatal(err)
	}
	prop, ok := p.CheckISR(time.Now().Add(time.Minute), time.Second)
	if !ok || !slices.Equal(prop.ISR, []int32{1}) || prop.LeaderEpoch != 1 {
		t.Fatalf("proposal %+v %v, want ISR [1] at epoch 1", prop, ok)
	}
	p.ISRCommitted(1, prop.ISR, 2, 10)
	if st := p.State(); !slices.Equal(st.View.ISR, []int32{1}) || st.View.Version != 10 {
		t.Fatalf("view after commit: %+v", st.View)
	}
	if hw := p.HighWatermark(); hw != 1 {
		t.Fatalf("hw %d with the leader alone in the ISR, want 1", hw)
	}
	// A commit for an epoch this broker no longer leads is ignored.
	if err := follower(2)(p); err != nil {
		t.Fatal(err)
	}
	p.ISRCommitted(1, []int32{1, 2}, 3, 11)
	if st := p.State(); st.View.Version == 11 {
		t.Fatalf("stale ISR commit applied: %+v", st.View)
	}
}

// TestTransitionWaitsForAppend: a leadership change waits for an append
// that passed its leader check.
func TestTransitionWaitsForAppend(t *testing.T) {
	p := openTest(t)
	if err := leader(1, 1)(p); err != nil {
		t.Fatal(err)
	}
	inCheck, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var epoch int32
	go func() {
		defer wg.Done()
		_, epoch, _ = p.AppendAsLeader(batch(), time.Now(), func(Leading) error {
			close(inCheck)
			<-release
			return nil
		})
	}()
	<-inCheck
	moved := make(chan error, 1)
	go func() { moved <- follower(2)(p) }()
	select {
	case <-moved:
		t.Fatal("the partition became follower while an append held its leader check")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if epoch != 1 {
		t.Fatalf("append under epoch %d, want 1", epoch)
	}
	if e, _ := p.Log().LatestEpoch(); e != 1 {
		t.Fatalf("latest epoch on the log %d, want 1", e)
	}
}

// TestFollowerDropsUnbackedEpoch: a broker that became leader (assigning
// its epoch at the log end) and lost the leadership before appending
// drops that epoch when it truncates at its log end, so it no longer
// sends it as its last fetched epoch.
func TestFollowerDropsUnbackedEpoch(t *testing.T) {
	p := openTest(t)
	if err := leader(1, 1)(p); err != nil {
		t.Fatal(err)
	}
	if err := appendLeader(p); err != nil {
		t.Fatal(err)
	}
	if err := leader(2, 1)(p); err != nil { // no append under epoch 2
		t.Fatal(err)
	}
	if err := follower(3)(p); err != nil {
		t.Fatal(err)
	}
	if _, last, _ := p.FetchState(); last != 2 {
		t.Fatalf("last fetched epoch %d before truncation, want 2", last)
	}
	if err := p.TruncateTo(p.Log().EndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, last, _ := p.FetchState(); last != 1 {
		t.Fatalf("last fetched epoch %d after truncating at the log end, want 1", last)
	}
}

// TestViewChangedIgnoresHighWatermark checks the two wake-ups a fetch
// waits on: a high watermark move closes HWChanged but not ViewChanged;
// a role change closes both.
func TestViewChangedIgnoresHighWatermark(t *testing.T) {
	p := openTest(t)
	if err := leader(1, 1, 2)(p); err != nil {
		t.Fatal(err)
	}
	if err := appendLeader(p); err != nil {
		t.Fatal(err)
	}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	hw, view := p.HWChanged(), p.ViewChanged()
	if _, err := p.ReplicaFetched(2, 1, 1, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if p.HighWatermark() != 1 {
		t.Fatalf("hw %d, want 1", p.HighWatermark())
	}
	if !closed(hw) {
		t.Fatal("a high watermark move did not close HWChanged")
	}
	if closed(view) {
		t.Fatal("a high watermark move closed ViewChanged")
	}
	hw = p.HWChanged()
	if err := follower(2)(p); err != nil {
		t.Fatal(err)
	}
	if !closed(hw) || !closed(view) {
		t.Fatalf("a role change closed HWChanged %v, ViewChanged %v; want both", closed(hw), closed(view))
	}
}
