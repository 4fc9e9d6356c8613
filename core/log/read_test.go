package log

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// fill appends n batches of 1-5 records with values of 20-300 bytes.
func fill(t testing.TB, l *Log, m *model, n int, seed uint64, ts int64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range n {
		appendBatch(t, l, m, plain(1+r.IntN(5), 20+r.IntN(280), ts+int64(i)*10))
	}
}

func TestAppendReadRoundtrip(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	var m model
	fill(t, l, &m, 150, 1, 1000)
	if got, want := l.EndOffset(), m.end(); got != want {
		t.Fatalf("end offset %d, want %d", got, want)
	}
	if n := len(segmentFiles(t, dir, ".log")); n < 10 {
		t.Fatalf("%d segments, want many with segment.bytes=4096", n)
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("reading the whole log does not return what was appended")
	}
	end := m.end()
	for off := int64(0); off < end; off++ {
		i := m.find(off)
		// maxBytes 1: exactly the batch containing off, whole (KIP-74).
		got := readBytes(t, l, off, 1, end)
		if !bytes.Equal(got, m.batches[i]) {
			t.Fatalf("read(%d, 1): got %d bytes, want batch %d (%d bytes)", off, len(got), i, len(m.batches[i]))
		}
		// Large maxBytes: a run of whole batches starting at batch i.
		got = readBytes(t, l, off, 1<<20, end)
		if !bytes.HasPrefix(m.bytesFrom(i), got) || len(got) < len(m.batches[i]) {
			t.Fatalf("read(%d, 1MiB) is not a run of batches from %d", off, i)
		}
		if i+1 < len(m.batches) {
			// maxBytes one short of two batches: only the first.
			two := len(m.batches[i]) + len(m.batches[i+1])
			if got := readBytes(t, l, off, two-1, end); !bytes.Equal(got, m.batches[i]) {
				t.Fatalf("read(%d, %d) returned %d bytes, want only batch %d", off, two-1, len(got), i)
			}
			// maxOffset at the next batch's base: only batch i.
			if got := readBytes(t, l, off, 1<<20, m.heads[i+1].BaseOffset); !bytes.Equal(got, m.batches[i]) {
				t.Fatalf("read(%d) below maxOffset %d returned %d bytes", off, m.heads[i+1].BaseOffset, len(got))
			}
		}
	}
	if got := readBytes(t, l, end, 1<<20, end); len(got) != 0 {
		t.Fatalf("read at end returned %d bytes", len(got))
	}
	if got := readBytes(t, l, 5, 1<<20, 5); len(got) != 0 {
		t.Fatalf("read at maxOffset returned %d bytes", len(got))
	}
	if _, err := l.Read(end+1, 100, end+1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past end: %v, want ErrOffsetOutOfRange", err)
	}
	if _, err := l.Read(-1, 100, end); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read at -1: %v, want ErrOffsetOutOfRange", err)
	}
}

func readBytes(t testing.TB, l *Log, off int64, maxBytes int, maxOffset int64) []byte {
	t.Helper()
	s, err := l.Read(off, maxBytes, maxOffset)
	if err != nil {
		t.Fatalf("read(%d): %v", off, err)
	}
	defer s.Close()
	b, err := s.Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != s.Len() {
		t.Fatalf("slice len %d, bytes %d", s.Len(), len(b))
	}
	var w bytes.Buffer
	if _, err := s.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), b) {
		t.Fatalf("WriteTo disagrees with Bytes: %v", err)
	}
	return b
}

func TestReadOversizedFirstBatch(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(nil))
	var m model
	appendBatch(t, l, &m, plain(3, 5000, 1)) // larger than the segment size too
	appendBatch(t, l, &m, plain(1, 10, 2))
	got := readBytes(t, l, 1, 100, l.EndOffset())
	if !bytes.Equal(got, m.batches[0]) {
		t.Fatalf("oversized first batch: got %d bytes, want %d", len(got), len(m.batches[0]))
	}
	// The next batch lives in the next segment: the read moves on.
	if got := readBytes(t, l, 3, 100, l.EndOffset()); !bytes.Equal(got, m.batches[1]) {
		t.Fatalf("read of second batch: %d bytes", len(got))
	}
}

func TestReadAfterIdleClose(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	var m model
	fill(t, l, &m, 100, 2, 1000)
	readAll(t, l)
	s, err := l.Read(0, 100, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	later := timeAfter(10)
	if err := l.Maintain(later, noHW); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	open := 0
	for _, sg := range segs {
		sg.mu.Lock()
		if sg.file != nil {
			open++
		}
		sg.mu.Unlock()
	}
	// Only the segment under the live slice stays open: an idle active
	// segment closes too (files.go), and reopens on the next append.
	if open != 1 || segs[0].file == nil {
		t.Fatalf("%d segment files open after idle close, want only segment 0's", open)
	}
	s.Close()
	if err := l.Maintain(later, noHW); err != nil {
		t.Fatal(err)
	}
	if segs[0].file != nil {
		t.Fatal("segment 0 still open after its slice closed")
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("reads after idle close differ")
	}
}
