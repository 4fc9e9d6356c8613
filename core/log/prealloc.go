package log

import (
	"os"
	"sync/atomic"
)

// Block reservation for the active segment. Appending to a file whose
// blocks are not yet allocated makes ext4 reserve and account every block
// of every write (delayed allocation: ext4_da_write_begin and its buffer
// heads cost more than the copy itself, ≈ 40% of a 1 MiB pwrite here).
// The appender therefore reserves the active segment's blocks a little
// ahead of the writes with fallocate(FALLOC_FL_KEEP_SIZE): the file's size
// does not change, so readers, recovery and the clean-shutdown table see
// exactly the bytes written, and writes into reserved blocks are ≈ 40%
// cheaper in CPU (BENCHMARKS.md, issue 15). Each reservation covers the
// write and as much again (at most preallocChunk), rounded up to
// preallocAlign: a partition written in large batches reserves about one
// batch ahead (one fallocate per write), one written in small batches at
// most 64 KiB ahead (one fallocate per 64 KiB), so a broker with many
// partitions holds little disk it does not use. Rolling the segment and
// closing the log give the reservation back (ftruncate to the size frees
// the blocks past the end). A crash leaves the then active segment's
// reservation, freed when that segment is rolled or deleted.
const (
	preallocChunk = 1 << 20  // the most reserved past a write's end
	preallocAlign = 64 << 10 // reservations end on this boundary
)

// preallocOff is set once a file system refuses fallocate (not all
// support KEEP_SIZE); appends then write without reserving.
var preallocOff atomic.Bool

// preallocateLocked reserves blocks of seg's file f for a write of n bytes
// at pos and min(n, preallocChunk) beyond, up to a preallocAlign
// boundary. Failure is not an error: the write allocates as it always
// could.
// REQUIRES: l.appendMu; seg is the active segment.
func (l *Log) preallocateLocked(seg *segment, f *os.File, pos, n int64) {
	end := pos + n
	if n <= 0 || end <= seg.preallocEnd || preallocOff.Load() {
		return
	}
	from := max(seg.preallocEnd, pos)
	to := (end + min(n, preallocChunk) + preallocAlign - 1) / preallocAlign * preallocAlign
	if err := fallocateKeepSize(f, from, to-from); err != nil {
		if unsupported(err) {
			preallocOff.Store(true)
		}
		return
	}
	seg.preallocEnd = to
}

// releasePreallocLocked frees the blocks reserved past seg's data, when
// it stops being the active segment or the log closes.
// REQUIRES: l.appendMu.
func (l *Log) releasePreallocLocked(seg *segment) {
	if seg.preallocEnd == 0 {
		return
	}
	seg.preallocEnd = 0
	f, err := seg.acquire()
	if err != nil {
		return
	}
	defer f.release()
	if err := f.f.Truncate(seg.meta.size); err != nil {
		l.config().Logger.Warn("log: could not free blocks reserved past a segment's end", "dir", l.dir, "segment", seg.base, "err", err)
	}
}
