//go:build linux

package log

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// allocated returns the size and the bytes of disk blocks of path.
func allocated(t *testing.T, path string) (size, blocks int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// The active segment's blocks are reserved ahead of the writes without
// changing its size (readers and recovery see only the data), and the
// reservation is given back when the segment rolls and when the log
// closes.
func TestPreallocateActiveSegment(t *testing.T) {
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	pf, err := os.Create(probe)
	if err != nil {
		t.Fatal(err)
	}
	ferr := fallocateKeepSize(pf, 0, preallocChunk)
	pf.Close()
	os.Remove(probe)
	if ferr != nil {
		t.Skipf("the file system of %s cannot reserve blocks: %v", dir, ferr)
	}
	if preallocOff.Load() {
		t.Skip("block reservation was switched off by an earlier refusal")
	}

	cfg := testConfig(nil)
	cfg.SegmentBytes = 4 * preallocChunk
	l := openLog(t, filepath.Join(dir, "log"), cfg)
	batch := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: bytes.Repeat([]byte("v"), 100_000)})
	for range 3 {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	first := l.segs[0].logPath()
	size, blocks := allocated(t, first)
	if want := int64(3 * len(batch)); size != want {
		t.Fatalf("active segment is %d bytes, want exactly the %d written", size, want)
	}
	if want := size + int64(len(batch)); blocks < want {
		t.Fatalf("active segment of %d bytes has %d bytes of blocks, want at least %d reserved (a write ahead)", size, blocks, want)
	}
	// Small writes reserve at most preallocAlign ahead.
	small := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("v")})
	l2 := openLog(t, filepath.Join(dir, "small"), cfg)
	for range 100 {
		if _, err := l2.Append(small, AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	size2, blocks2 := allocated(t, l2.segs[0].logPath())
	if blocks2 < size2 || blocks2 > size2+preallocAlign+preallocAlign/2 {
		t.Fatalf("segment of %d bytes written in small batches has %d bytes of blocks, want at most %d ahead", size2, blocks2, preallocAlign)
	}
	// Fill past the segment size: the first segment rolls and gives its
	// reservation back.
	for l.Size() < 5*preallocChunk {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.segs) < 2 {
		t.Fatalf("%d segments after %d bytes, want a roll", len(l.segs), l.Size())
	}
	size, blocks = allocated(t, first)
	// (st_blocks also counts the extent tree's own blocks: allow some.)
	if blocks > size+preallocAlign/2 {
		t.Fatalf("rolled segment of %d bytes keeps %d bytes of blocks", size, blocks)
	}
	active := l.segs[len(l.segs)-1].logPath()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	size, blocks = allocated(t, active)
	if blocks > size+preallocAlign/2 {
		t.Fatalf("closed log's last segment of %d bytes keeps %d bytes of blocks", size, blocks)
	}
}
