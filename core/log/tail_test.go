package log

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// fileRead is Read from the segment files, bypassing the tail cache.
func fileRead(t *testing.T, l *Log, off int64, maxBytes int, maxOffset int64) []byte {
	t.Helper()
	l.mu.RLock()
	i, _ := l.segmentForLocked(off)
	segs, interval := l.segs[i:], int64(l.cfg.IndexIntervalBytes)
	l.mu.RUnlock()
	s, err := readFiles(segs, off, int64(maxBytes), maxOffset, interval)
	if err != nil {
		t.Fatalf("file read at %d: %v", off, err)
	}
	defer s.Close()
	b, err := s.Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTailCacheReadsLikeTheFile follows a log as a replica does (reads a
// few batches behind its end, with random limits) through appends, rolls,
// cache trims and truncations, and checks every read against the model
// and against the same read from the files; most reads must come from
// memory.
func TestTailCacheReadsLikeTheFile(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1 << 20 // a few rolls over the run
	l := openLog(t, t.TempDir(), cfg)
	var m model
	r := rand.New(rand.NewPCG(7, 7))
	reads, fromMemory := 0, 0
	for step := range 1500 {
		switch k := r.IntN(100); {
		case k < 2 && len(m.batches) > 10:
			n := len(m.batches) - 1 - r.IntN(10)
			if err := l.Truncate(m.heads[n].BaseOffset); err != nil {
				t.Fatalf("step %d: truncate: %v", step, err)
			}
			m.truncate(n)
		case k < 4:
			// A large batch: more than tailKeep, sometimes more than tailMax.
			appendBatch(t, l, &m, plain(1+r.IntN(3), 30<<10+r.IntN(100<<10), int64(step)))
		default:
			appendBatch(t, l, &m, plain(1+r.IntN(5), 20+r.IntN(2000), int64(step)))
		}
		end := m.end()
		for range 3 {
			back := int64(r.IntN(40))
			off := max(0, end-back)
			maxBytes := []int{1, 500, 4096, 64 << 10, 1 << 20}[r.IntN(5)]
			maxOffset := end - int64(r.IntN(3))
			if off > maxOffset {
				maxOffset = end
			}
			s, err := l.Read(off, maxBytes, maxOffset)
			if err != nil {
				t.Fatalf("step %d: read(%d, %d, %d): %v", step, off, maxBytes, maxOffset, err)
			}
			got, err := s.Bytes(nil)
			if err != nil {
				t.Fatal(err)
			}
			fromFile := s.File() != nil
			s.Close()
			reads++
			if !fromFile && s.Len() > 0 {
				fromMemory++
			}
			var want []byte
			if off < maxOffset && off < end { // Read's own checks
				want = fileRead(t, l, off, maxBytes, maxOffset)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("step %d: read(%d, %d, %d): %d bytes, the files give %d", step, off, maxBytes, maxOffset, len(got), len(want))
			}
			if off < maxOffset && off < end {
				i := m.find(off)
				if !runOfBatches(m.batches[i:], got) {
					t.Fatalf("step %d: read(%d) is not a run of whole batches from batch %d", step, off, i)
				}
			}
		}
	}
	if fromMemory < reads/2 {
		t.Fatalf("%d of %d reads came from the tail cache, want most", fromMemory, reads)
	}
	t.Logf("%d of %d reads from the tail cache", fromMemory, reads)
}

// TestTailCacheDroppedWhenIdle checks that Maintain drops a cache no read
// used for idleClose, and that a segment nobody reads never gets one.
func TestTailCacheDroppedWhenIdle(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(nil))
	var m model
	appendBatch(t, l, &m, plain(2, 100, 1))
	act := l.active()
	hasTail := func() bool { act.mu.Lock(); defer act.mu.Unlock(); return act.tail != nil }
	if hasTail() {
		t.Fatal("a segment nobody read has a tail cache")
	}
	readBytes(t, l, 0, 1<<20, l.EndOffset())
	appendBatch(t, l, &m, plain(2, 100, 2))
	if !hasTail() {
		t.Fatal("a read of the active segment started no tail cache")
	}
	if got := readBytes(t, l, 2, 1<<20, l.EndOffset()); !bytes.Equal(got, m.batches[1]) {
		t.Fatal("tail read differs from the batch appended")
	}
	if err := l.Maintain(time.Now().Add(idleClose+time.Second), noHW); err != nil {
		t.Fatal(err)
	}
	if hasTail() {
		t.Fatal("Maintain kept a tail cache idle for longer than idleClose")
	}
}

// runOfBatches reports whether b is batches[0], batches[1], ... whole.
func runOfBatches(batches [][]byte, b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, batch := range batches {
		if len(b) == 0 {
			return true
		}
		if !bytes.HasPrefix(b, batch) {
			return false
		}
		b = b[len(batch):]
	}
	return len(b) == 0
}

// BenchmarkTailRead is a replica's read at the log end after each append
// of a 1 KiB batch: from the tail cache ("cache") and from the files, as
// before it ("file": offset index, header scan, data read). The append is
// not timed.
func BenchmarkTailRead(b *testing.B) {
	for _, fromFile := range []bool{false, true} {
		name := "cache"
		if fromFile {
			name = "file"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Logger = testConfig(nil).Logger
			l := openLog(b, b.TempDir(), cfg)
			batch := makeBatch(plain(1, 1000, 1))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer() // the read alone is measured
				off := l.EndOffset()
				if _, err := l.Append(bytes.Clone(batch), AppendOptions{LeaderEpoch: -1}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var s *Slice
				var err error
				if fromFile {
					l.mu.RLock()
					i, _ := l.segmentForLocked(off)
					segs := l.segs[i:]
					l.mu.RUnlock()
					s, err = readFiles(segs, off, 1<<20, off+1, 4096)
				} else {
					s, err = l.Read(off, 1<<20, off+1)
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Bytes(nil); err != nil || s.Len() == 0 {
					b.Fatal(err, s.Len())
				}
				s.Close()
			}
		})
	}
}
