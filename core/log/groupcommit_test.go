package log

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vltava/vltava/core/record"
)

// TestGroupCommitOneFsyncForMany: with flush.messages=1, appends that
// arrive while an fsync runs share the next one. Every append is durable
// (covered by an fsync) before it returns, and all are readable in order.
func TestGroupCommitOneFsyncForMany(t *testing.T) {
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	l := openLog(t, t.TempDir(), cfg)
	var calls atomic.Int64
	var syncedUpTo atomic.Int64 // the log end when the running fsync started
	swapFsync(t, func(*os.File) error {
		calls.Add(1)
		time.Sleep(2 * time.Millisecond) // a disk: appends pile up meanwhile
		return nil
	})
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				res, err := l.Append(makeBatch(plain(1, 20, int64(w*1000+i))), AppendOptions{LeaderEpoch: -1})
				if err != nil {
					errs <- err
					return
				}
				// Durable and visible when acknowledged.
				if end := l.EndOffset(); end <= res.LastOffset {
					errs <- errors.New("an acknowledged append is not visible")
				}
				syncedUpTo.Store(max(syncedUpTo.Load(), res.LastOffset))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := l.EndOffset(); got != writers*each {
		t.Fatalf("log end %d, want %d", got, writers*each)
	}
	if n := calls.Load(); n >= writers*each {
		t.Errorf("%d fsyncs for %d appends: no group commit", n, writers*each)
	} else {
		t.Logf("%d appends, %d fsyncs", writers*each, n)
	}
	s, err := l.Read(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	var next int64
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want %d", h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
		b = b[h.Size():]
	}
}

// TestGroupCommitFailureAcknowledgesNothing: when the shared fsync fails,
// every append it would have covered fails, none becomes visible, and a
// reopened log does not bring them back.
func TestGroupCommitFailureAcknowledgesNothing(t *testing.T) {
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	var m model
	appendBatch(t, l, &m, plain(2, 20, 1))
	before := l.EndOffset()
	ioErr := errors.New("injected EIO")
	gate := make(chan struct{})
	swapFsync(t, func(*os.File) error { <-gate; return ioErr })
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 6 {
		wg.Go(func() {
			if _, err := l.Append(makeBatch(plain(1, 20, int64(10+i))), AppendOptions{LeaderEpoch: -1}); err != nil {
				failed.Add(1)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // let them all write and queue
	if got := l.EndOffset(); got != before {
		t.Fatalf("log end %d before any fsync, want %d", got, before)
	}
	close(gate)
	wg.Wait()
	if failed.Load() != 6 {
		t.Fatalf("%d of 6 appends failed with the fsync, want all", failed.Load())
	}
	if got := l.EndOffset(); got != before {
		t.Fatalf("log end %d after the failed fsync, want %d", got, before)
	}
	swapFsync(t, func(*os.File) error { return nil })
	crash(l)
	l = openLog(t, dir, cfg)
	if got := l.EndOffset(); got != before {
		t.Fatalf("reopened log ends at %d, want %d: failed appends came back", got, before)
	}
}
