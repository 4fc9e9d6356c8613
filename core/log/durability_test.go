package log

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncedImage records, for every .log file, its content at its last fsync:
// what a power loss would leave of it.
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
	s.files[filepath.Base(f.Name())] = b
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
		synced := img.files[filepath.Base(s.logPath())]
		if int64(len(synced)) < n || !bytes.Equal(synced[:n], cur[:n]) {
			t.Fatalf("recovery point %d covers %d bytes of segment %d, but its last fsync saw %d bytes that differ: a power loss would leave a torn segment recovery trusts",
				rp, n, s.base, len(synced))
		}
	}
}
