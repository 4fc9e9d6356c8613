package partition

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// BenchmarkAppendAsLeader is the leader's append path of one produced
// batch (16 records of 1 KiB, uncompressed) below the produce handler:
// the leader check, the caller's check, log.Append (offsets, epoch, write
// to the page cache, index) and the high watermark of a one-member ISR.
// Issue 15 asks for zero allocations per batch here:
//
//	go test -run '^$' -bench AppendAsLeader -benchmem ./core/partition/
func BenchmarkAppendAsLeader(b *testing.B) {
	cfg, err := config.ResolveTopic(config.DefaultBroker(), nil)
	if err != nil {
		b.Fatal(err)
	}
	lcfg := log.DefaultConfig()
	lcfg.SegmentBytes = 256 << 20
	l, err := log.Open(filepath.Join(b.TempDir(), "t-0"), lcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	p := New("t", 0, l, cfg)
	p.LockTransitions()
	_, err = p.BecomeLeaderLocked(1, View{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}, Version: 1}, time.Now())
	p.UnlockTransitions()
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]recordtest.Rec, 16)
	for i := range recs {
		recs[i] = recordtest.Rec{Value: make([]byte, 1024), Timestamp: 1000}
	}
	batch := recordtest.Batch(record.CodecNone, recs...)
	check := func(Leading) error { return nil }
	now := time.Now()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.AppendAsLeader(batch, now, check); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAppendAsLeaderAllocatesNothing: appending a batch as the leader
// with nobody waiting on the partition allocates nothing per batch (the
// wake-up channels are replaced only once taken; the batch list is
// reused). Averaged over many appends, so the index's and segment's
// amortized growth do not count.
func TestAppendAsLeaderAllocatesNothing(t *testing.T) {
	if invariant.Enabled || raceEnabled {
		t.Skip("the invariants build and the race detector allocate")
	}
	p := openTest(t)
	if err := leader(1, 1)(p); err != nil {
		t.Fatal(err)
	}
	batch := batch()
	now := time.Now()
	check := func(Leading) error { return nil }
	allocs := testing.AllocsPerRun(200, func() {
		if _, _, err := p.AppendAsLeader(batch, now, check); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendAsLeader: %v allocations per batch, want 0", allocs)
	}
}
