package log

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncedImage records, for every .log file by the path it was opened
// with, its content at its last fsync: what a power loss would leave of it.
type syncedImage struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (s *syncedImage) fsync(f *os.File) error {
	fsyncs.Add(1)
	if !strings.HasSuffix(f.Name(), ".log") {
		return nil
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.files[f.Name()] = b
	s.mu.Unlock()
	return nil
}

// swapFsync replaces the package's fsync for one test.
func swapFsync(t *testing.T, fn func(*os.File) error) {
	t.Helper()
	prev := fsync
	fsync = fn
	t.Cleanup(func() { fsync = prev })
}

// Fault 5 of issue 9: Flush read the log end, fsynced, and then
// checkpointed that end as the recovery point, with nothing excluding a
// Truncate and a re-append in between. The recovery point then covered
// bytes no fsync had seen: after a power loss recovery would trust them.
// Here the truncation and the re-append are started from inside Flush's
// fsync; afterwards every batch below the recovery point must be byte for
// byte what the last fsync of its file saw.
func TestRecoveryPointNeverPassesSyncedData(t *testing.T) {
	img := &syncedImage{files: map[string][]byte{}}
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1 << 20
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	for i := range 10 {
		appendBatch(t, l, nil, plain(1, 100, int64(i)))
	}

	var once sync.Once
	raced := make(chan error, 1)
	swapFsync(t, func(f *os.File) error {
		err := img.fsync(f)
		if !strings.HasSuffix(f.Name(), ".log") {
			return err
		}
		once.Do(func() {
			// Inside Flush's first segment fsync: cut the log back and
			// append different bytes at the same offsets.
			go func() {
				if err := l.Truncate(5); err != nil {
					raced <- err
					return
				}
				for i := range 5 {
					if _, err := l.Append(makeBatch(plain(1, 100, int64(1000+i))), AppendOptions{LeaderEpoch: -1}); err != nil {
						raced <- err
						return
					}
				}
				raced <- nil
			}()
			// Give the truncation time to run if nothing stops it (it must
			// wait for the flush once they exclude each other).
			select {
			case err := <-raced:
				raced <- err
			case <-time.After(300 * time.Millisecond):
			}
		})
		return err
	})
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := <-raced; err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 10 {
		t.Fatalf("log end %d after truncate to 5 and 5 appends, want 10", l.EndOffset())
	}
	rp, err := readOffsetCheckpoint(dir, recoveryPointFile)
	if err != nil {
		t.Fatal(err)
	}
	checkSyncedBelow(t, l, img, rp)
}

// checkSyncedBelow fails unless every batch of l below rp is, at its
// position, what the last fsync of its segment file held.
func checkSyncedBelow(t *testing.T, l *Log, img *syncedImage, rp int64) {
	t.Helper()
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	img.mu.Lock()
	defer img.mu.Unlock()
	for _, s := range segs {
		if s.base >= rp {
			break
		}
		cur, err := os.ReadFile(s.logPath())
		if err != nil {
			t.Fatal(err)
		}
		// The bytes of every batch whose last offset is below rp.
		var n int64
		sc := newHeaderScanner(bytes.NewReader(cur), 0, int64(len(cur)))
		for {
			h, p, err := sc.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.LastOffset() >= rp {
				break
			}
			n = p + int64(h.Size())
		}
		synced := img.files[s.logPath()]
		if int64(len(synced)) < n || !bytes.Equal(synced[:n], cur[:n]) {
			t.Fatalf("recovery point %d covers %d bytes of segment %d, but its last fsync saw %d bytes that differ: a power loss would leave a torn segment recovery trusts",
				rp, n, s.base, len(synced))
		}
	}
}

// Fault 6 of issue 9: an fsync failure was returned after the records had
// become visible, and the log went on. Now, with flush.messages=1, the
// records whose fsync failed are never readable, the log goes offline
// (ErrStorage on every append and read) and the owner is told once.
func TestSyncFailureTakesLogOffline(t *testing.T) {
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	var mu sync.Mutex
	var reported []error
	cfg.OnStorageError = func(dir string, err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	var m model
	for i := range 3 {
		appendBatch(t, l, &m, plain(2, 50, int64(i)))
	}
	before := l.EndOffset()
	ioErr := errors.New("injected EIO")
	swapFsync(t, func(f *os.File) error { return ioErr })
	_, err := l.Append(makeBatch(plain(2, 50, 9)), AppendOptions{LeaderEpoch: -1})
	if !errors.Is(err, ErrStorage) || !errors.Is(err, ioErr) {
		t.Fatalf("append with a failing fsync: %v, want ErrStorage wrapping the I/O error", err)
	}
	if got := l.EndOffset(); got != before {
		t.Fatalf("log end %d after a failed fsync, want %d: unsynced records became visible", got, before)
	}
	if _, err := l.Read(0, 1<<20, before+2); !errors.Is(err, ErrStorage) {
		t.Fatalf("read of an offline log: %v, want ErrStorage", err)
	}
	swapFsync(t, func(*os.File) error { fsyncs.Add(1); return nil }) // the disk "recovers": the log stays offline
	if _, err := l.Append(makeBatch(plain(1, 50, 10)), AppendOptions{LeaderEpoch: -1}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after the failure: %v, want ErrStorage", err)
	}
	if err := l.Flush(); !errors.Is(err, ErrStorage) {
		t.Fatalf("flush after the failure: %v, want ErrStorage", err)
	}
	if err := l.Truncate(0); !errors.Is(err, ErrStorage) {
		t.Fatalf("truncate after the failure: %v, want ErrStorage", err)
	}
	if !errors.Is(l.Err(), ErrStorage) {
		t.Fatalf("Err() = %v", l.Err())
	}
	mu.Lock()
	if len(reported) != 1 || !errors.Is(reported[0], ErrStorage) {
		t.Errorf("OnStorageError calls: %v, want one", reported)
	}
	mu.Unlock()
	// SetConfig without a callback keeps it (the broker resets configs).
	cfg.OnStorageError = nil
	l.SetConfig(cfg)
	if l.config().OnStorageError == nil {
		t.Error("SetConfig dropped OnStorageError")
	}
	// A restart recovers exactly the acknowledged batches: the refused one
	// was cut from the file, so recovery cannot bring it back.
	l.Close()
	l = openLog(t, dir, testConfig(nil))
	if l.EndOffset() != before || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatalf("after reopening: end %d, want %d with the acknowledged batches only", l.EndOffset(), before)
	}
}

// InjectSyncFailure fails the fsyncs of one directory only.
func TestInjectSyncFailure(t *testing.T) {
	swapFsync(t, fsyncReal) // the production fsync, with its injection check
	a, b := t.TempDir(), t.TempDir()
	ioErr := errors.New("injected")
	cfg := testConfig(nil)
	cfg.FlushMessages = 1
	la, lb := openLog(t, a, cfg), openLog(t, b, cfg)
	undo := InjectSyncFailure(a, ioErr)
	if _, err := la.Append(makeBatch(plain(1, 10, 1)), AppendOptions{LeaderEpoch: -1}); !errors.Is(err, ioErr) || !errors.Is(err, ErrStorage) {
		t.Fatalf("append under %s: %v", a, err)
	}
	if _, err := lb.Append(makeBatch(plain(1, 10, 1)), AppendOptions{LeaderEpoch: -1}); err != nil {
		t.Fatalf("append under %s: %v", b, err)
	}
	undo()
	if err := syncDir(a); err != nil {
		t.Fatalf("fsync after undo: %v", err)
	}
}
