package log

import (
	"bytes"
	"os"
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
