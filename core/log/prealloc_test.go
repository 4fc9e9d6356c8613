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
	if blocks < preallocChunk {
		t.Fatalf("active segment of %d bytes has %d bytes of blocks, want the %d reserved", size, blocks, preallocChunk)
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
	if blocks > size+4096 {
		t.Fatalf("rolled segment of %d bytes keeps %d bytes of blocks", size, blocks)
	}
	active := l.segs[len(l.segs)-1].logPath()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	size, blocks = allocated(t, active)
	if blocks > size+4096 {
		t.Fatalf("closed log's last segment of %d bytes keeps %d bytes of blocks", size, blocks)
	}
}
