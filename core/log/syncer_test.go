package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vltava/vltava/core/record"
)

// synced reports whether the batch holding offset is whole in the
// fsynced image of one of dir's segment files.
func (s *syncedImage) synced(dir string, offset int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, b := range s.files {
		if filepath.Dir(name) != dir {
			continue
		}
		for len(b) > 0 {
			h, err := record.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				break
			}
			if h.BaseOffset <= offset && offset <= h.LastOffset() {
				return true
			}
			b = b[h.Size():]
		}
	}
	return false
}

// openSynced opens n flush.messages=1 logs sharing a Syncer, closed (after
// the logs) at the end of the test.
func openSynced(t *testing.T, n int) ([]*Log, *Syncer) {
	t.Helper()
	s := NewSyncer()
	t.Cleanup(s.Close)
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	cfg.Syncer = s
	logs := make([]*Log, n)
	for i := range logs {
		logs[i] = openLog(t, t.TempDir(), cfg) // closed by its own cleanup, before s
	}
	return logs, s
}

// TestSyncerAcknowledgesOnlySyncedAppends: writers append to six logs
// sharing a Syncer, each writing all six before waiting for any
// (DeferDurable, as a produce request does). Every append that
// AwaitDurable acknowledges is in the fsynced image of its file, i.e. it
// survives a power loss; appends share fsyncs; the logs hold everything.
func TestSyncerAcknowledgesOnlySyncedAppends(t *testing.T) {
	img := &syncedImage{files: map[string][]byte{}}
	swapFsync(t, img.fsync)
	logs, _ := openSynced(t, 6)
	before := fsyncs.Load()
	const writers, rounds = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds*len(logs))
	for w := range writers {
		wg.Go(func() {
			res := make([]AppendResult, len(logs))
			for i := range rounds {
				for j, l := range logs {
					r, err := l.Append(makeBatch(plain(1, 50, int64(w*1000+i))), AppendOptions{LeaderEpoch: -1, DeferDurable: true})
					if err != nil {
						errs <- err
						return
					}
					if r.DurableAt != r.LastOffset+1 {
						errs <- errors.New("a deferred durable append has no DurableAt")
						return
					}
					res[j] = r
				}
				for j, l := range logs {
					if err := l.AwaitDurable(res[j].DurableAt); err != nil {
						errs <- err
						return
					}
					if !img.synced(l.Dir(), res[j].LastOffset) {
						errs <- fmt.Errorf("%s: offset %d acknowledged, not in the fsynced files", l.Dir(), res[j].LastOffset)
						return
					}
					if l.EndOffset() <= res[j].LastOffset {
						errs <- errors.New("an acknowledged append is not visible")
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, l := range logs {
		if got := l.EndOffset(); got != writers*rounds {
			t.Fatalf("%s ends at %d, want %d", l.Dir(), got, writers*rounds)
		}
	}
	appends := int64(writers * rounds * len(logs))
	n := fsyncs.Load() - before
	t.Logf("%d appends, %d fsyncs", appends, n)
	if n >= appends {
		t.Errorf("%d fsyncs for %d appends: no group commit", n, appends)
	}
}

// TestSyncerOverlapsFsyncsOfOneRequest: one goroutine writes six logs and
// then waits for them, as one produce request over six partitions does.
// The six fsyncs must run at the same time (each one here blocks until
// all six have started); waiting for each log in turn would run one.
func TestSyncerOverlapsFsyncsOfOneRequest(t *testing.T) {
	logs, _ := openSynced(t, 6)
	var inFlight, most atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	swapFsync(t, func(f *os.File) error {
		if !strings.HasSuffix(f.Name(), ".log") {
			return nil
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n == int64(len(logs)) {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second): // no overlap: fail, do not hang
		}
		return nil
	})
	res := make([]AppendResult, len(logs))
	for i, l := range logs {
		r, err := l.Append(makeBatch(plain(2, 50, 1)), AppendOptions{LeaderEpoch: -1, DeferDurable: true})
		if err != nil {
			t.Fatal(err)
		}
		res[i] = r
	}
	for i, l := range logs {
		if err := l.AwaitDurable(res[i].DurableAt); err != nil {
			t.Fatal(err)
		}
	}
	if got := most.Load(); got != int64(len(logs)) {
		t.Fatalf("at most %d of %d fsyncs ran at once", got, len(logs))
	}
}

// TestSyncerFailureFailsItsLogOnly: an fsync error takes its log offline
// and fails the appends waiting on it, which never become visible; the
// other logs of the Syncer go on.
func TestSyncerFailureFailsItsLogOnly(t *testing.T) {
	logs, _ := openSynced(t, 2)
	bad, good := logs[0], logs[1]
	swapFsync(t, func(f *os.File) error {
		if strings.HasPrefix(f.Name(), bad.Dir()+string(filepath.Separator)) {
			return errors.New("injected EIO")
		}
		return nil
	})
	rb, err := bad.Append(makeBatch(plain(1, 20, 1)), AppendOptions{LeaderEpoch: -1, DeferDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	rg, err := good.Append(makeBatch(plain(1, 20, 1)), AppendOptions{LeaderEpoch: -1, DeferDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.AwaitDurable(rb.DurableAt); !errors.Is(err, ErrStorage) {
		t.Fatalf("AwaitDurable after a failed fsync: %v, want ErrStorage", err)
	}
	if got := bad.EndOffset(); got != 0 {
		t.Fatalf("failed log ends at %d, want 0: an unsynced append became visible", got)
	}
	if err := good.AwaitDurable(rg.DurableAt); err != nil {
		t.Fatal(err)
	}
	if _, err := good.Append(makeBatch(plain(1, 20, 2)), AppendOptions{LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	if got := good.EndOffset(); got != 2 {
		t.Fatalf("healthy log ends at %d, want 2", got)
	}
}

// TestSyncerClosedWaitersSyncThemselves: after the Syncer closes (a
// broker stopping), appends still wait for their fsync, made on the
// waiter's goroutine; and a log closed while an append awaits its fsync
// answers the waiter (Close flushes what was written).
func TestSyncerClosedWaitersSyncThemselves(t *testing.T) {
	img := &syncedImage{files: map[string][]byte{}}
	swapFsync(t, img.fsync)
	logs, s := openSynced(t, 2)
	s.Close()
	r, err := logs[0].Append(makeBatch(plain(1, 20, 1)), AppendOptions{LeaderEpoch: -1, DeferDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := logs[0].AwaitDurable(r.DurableAt); err != nil {
		t.Fatal(err)
	}
	if !img.synced(logs[0].Dir(), r.LastOffset) {
		t.Fatalf("offset %d acknowledged, not in the fsynced files", r.LastOffset)
	}
	if _, err := logs[0].Append(makeBatch(plain(1, 20, 2)), AppendOptions{LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	r, err = logs[1].Append(makeBatch(plain(1, 20, 1)), AppendOptions{LeaderEpoch: -1, DeferDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := logs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := logs[1].AwaitDurable(r.DurableAt); err != nil {
		t.Fatalf("AwaitDurable after Close flushed the append: %v", err)
	}
}
