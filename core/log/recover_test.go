package log

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vltava/vltava/core/record"
)

// tornLog writes a log whose last segment holds several unflushed batches
// and returns its directory and model. Everything before the last segment
// is flushed.
func tornLog(t *testing.T) (string, *model) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	var m model
	fill(t, l, &m, 60, 8, 1000)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		appendBatch(t, l, &m, plain(3, 100, int64(9000+i)))
	}
	crash(l)
	return dir, &m
}

// lastSegment returns the path of the last .log file and the model index of
// its first batch.
func lastSegment(t *testing.T, dir string, m *model) (string, int) {
	logs := segmentFiles(t, dir, ".log")
	path := logs[len(logs)-1]
	base, _ := parseSegName(path[len(path)-len("00000000000000000000.log"):], logSuffix)
	return path, m.find(base)
}

func TestTornTail(t *testing.T) {
	cases := []struct {
		name string
		// damage changes the last segment file (batches from model index
		// first on) and returns the model index of the first bad batch.
		damage func(t *testing.T, path string, m *model, first int) int
	}{
		{"truncated mid-batch", func(t *testing.T, path string, m *model, first int) int {
			last := len(m.batches) - 1
			if err := os.Truncate(path, fileSize(t, path)-int64(len(m.batches[last])/2)); err != nil {
				t.Fatal(err)
			}
			return last
		}},
		{"truncated inside header", func(t *testing.T, path string, m *model, first int) int {
			last := len(m.batches) - 1
			if err := os.Truncate(path, fileSize(t, path)-int64(len(m.batches[last]))+20); err != nil {
				t.Fatal(err)
			}
			return last
		}},
		{"garbage appended", func(t *testing.T, path string, m *model, first int) int {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(bytes.Repeat([]byte{0x5a}, 777))
			f.Close()
			return len(m.batches)
		}},
		{"flipped byte in last batch", func(t *testing.T, path string, m *model, first int) int {
			last := len(m.batches) - 1
			flipByte(t, path, fileSize(t, path)-10)
			return last
		}},
		{"flipped byte in middle batch", func(t *testing.T, path string, m *model, first int) int {
			mid := first + 2
			pos := int64(0)
			for _, b := range m.batches[first:mid] {
				pos += int64(len(b))
			}
			flipByte(t, path, pos+record.HeaderSize+5)
			return mid
		}},
		{"flipped length in middle batch", func(t *testing.T, path string, m *model, first int) int {
			mid := first + 3
			pos := int64(0)
			for _, b := range m.batches[first:mid] {
				pos += int64(len(b))
			}
			flipByte(t, path, pos+9)
			return mid
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, m := tornLog(t)
			path, first := lastSegment(t, dir, m)
			bad := c.damage(t, path, m, first)
			m.truncate(bad)
			l := openLog(t, dir, testConfig(nil))
			if got, want := l.EndOffset(), m.end(); got != want {
				t.Fatalf("end offset %d after recovery, want %d", got, want)
			}
			if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
				t.Fatal("recovered content differs from the valid prefix")
			}
			res := appendBatch(t, l, m, plain(2, 50, 20000))
			if res.BaseOffset != m.heads[len(m.heads)-1].BaseOffset || res.BaseOffset != m.heads[len(m.heads)-2].LastOffset()+1 {
				t.Fatalf("append after recovery at %d", res.BaseOffset)
			}
			if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
				t.Fatal("content differs after appending to the recovered log")
			}
		})
	}
}

// A corrupt batch in an unflushed segment that is not the last one cuts the
// log there and deletes the later segments.
func TestCorruptUnflushedMiddleSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	var m model
	fill(t, l, &m, 80, 9, 1000) // never flushed: recovery scans everything
	crash(l)
	logs := segmentFiles(t, dir, ".log")
	victim := logs[len(logs)-3]
	base, _ := parseSegName(victim[len(victim)-24:], logSuffix)
	first := m.find(base)
	flipByte(t, victim, int64(len(m.batches[first]))+record.HeaderSize+1)
	m.truncate(first + 1)
	l = openLog(t, dir, testConfig(nil))
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatalf("end %d want %d, or content differs", l.EndOffset(), m.end())
	}
	if n := len(segmentFiles(t, dir, ".log")); n != len(logs)-2 {
		t.Fatalf("%d segments after recovery, want %d", n, len(logs)-2)
	}
	appendBatch(t, l, &m, plain(1, 10, 1))
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after append")
	}
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// FuzzRecover appends arbitrary bytes to a valid segment file; Open must
// not panic and must recover a valid prefix that includes the valid batches.
func FuzzRecover(f *testing.F) {
	var valid []byte
	var m model
	for i := range 4 {
		b := makeBatch(plain(i+1, 30, int64(100*i)))
		record.SetBaseOffset(b, m.end())
		m.add(b)
		valid = append(valid, b...)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Add(makeBatch(plain(2, 10, 5)))
	f.Add(m.batches[0][:40])
	f.Add(bytes.Repeat([]byte{0xff}, 100))
	next := makeBatch(plain(1, 5, 7))
	record.SetBaseOffset(next, m.end())
	f.Add(next)
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(dir+"/"+segName(0)+logSuffix, append(bytes.Clone(valid), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, testConfig(nil))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		if l.EndOffset() < m.end() {
			t.Fatalf("end %d lost valid batches ending at %d", l.EndOffset(), m.end())
		}
		got := readAll(t, l)
		if !bytes.HasPrefix(got, valid) {
			t.Fatal("recovered log does not start with the valid batches")
		}
		if _, err := l.Append(makeBatch(plain(1, 1, 1)), AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// TestRecoveryStartsAtRecoveryPoint: after a crash, recovery validates the
// segment holding the recovery point from its last indexed batch below
// that point, not from the segment's start, and still cuts a torn tail;
// an index entry that does not name a batch sends it back to the start.
func TestRecoveryStartsAtRecoveryPoint(t *testing.T) {
	for _, c := range []struct {
		name       string
		damage     func(t *testing.T, dir, active string)
		fromStart  bool // validation must start at position 0
		tornBatchs int  // batches lost from the end
	}{
		{"unflushed tail intact", func(*testing.T, string, string) {}, false, 0},
		{"unflushed tail torn", func(t *testing.T, _, active string) {
			if err := os.Truncate(active, fileSize(t, active)-7); err != nil {
				t.Fatal(err)
			}
		}, false, 1},
		{"index entry names no batch", func(t *testing.T, _, active string) {
			idx := strings.TrimSuffix(active, logSuffix) + indexSuffix
			b, err := os.ReadFile(idx)
			if err != nil || len(b) < 2*offsetEntrySize {
				t.Fatalf("index %d bytes, %v", len(b), err)
			}
			// Every entry's position moves 3 bytes into its batch.
			for i := 4; i < len(b); i += offsetEntrySize {
				b[i+3] += 3
			}
			if err := os.WriteFile(idx, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs logBuffer
			cfg := testConfig(&logs)
			cfg.SegmentBytes = 1 << 20 // one segment
			l := openLog(t, dir, cfg)
			var m model
			fill(t, l, &m, 60, 9, 1000)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			flushed := fileSize(t, segmentFiles(t, dir, logSuffix)[0])
			fill(t, l, &m, 5, 10, 5000)
			crash(l)
			active := segmentFiles(t, dir, logSuffix)[0]
			c.damage(t, dir, active)
			logs = logBuffer{}
			l = openLog(t, dir, cfg)
			line := logs.String()
			from := int64(-1)
			if i := strings.Index(line, "validated_from="); i >= 0 {
				fmt.Sscanf(line[i+len("validated_from="):], "%d", &from)
			}
			switch {
			case c.fromStart && from != 0:
				t.Errorf("validation started at %d, want 0 (the index is wrong):\n%s", from, line)
			case !c.fromStart && (from <= 0 || from > flushed):
				t.Errorf("validation started at %d, want within the %d flushed bytes, after 0:\n%s", from, flushed, line)
			}
			want := m.batches[:len(m.batches)-c.tornBatchs]
			var all []byte
			for _, b := range want {
				all = append(all, b...)
			}
			if got := readAll(t, l); !bytes.Equal(got, all) {
				t.Fatalf("after recovery: %d bytes, want %d", len(got), len(all))
			}
			// The rebuilt index serves reads from anywhere.
			for _, off := range []int64{0, m.end() / 2, m.end() - 1} {
				if off >= l.EndOffset() {
					continue
				}
				sl, err := l.Read(off, 1<<20, l.EndOffset())
				if err != nil {
					t.Errorf("read at %d: %v", off, err)
					continue
				}
				sl.Close()
			}
		})
	}
}
