package log

import (
	"sort"
	"time"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/record"
)

// The tail cache: the active segment's most recent bytes in memory.
//
// A replica (or a consumer) that keeps up reads the last few batches the
// leader appended, each a few milliseconds old. From the file such a read
// is an index lookup, a header scan with positioned reads and a read of
// the data (or a sendfile): two or three blocking file system calls per
// partition per fetch, each a chance for the Go scheduler to hand the
// thread's P to another thread (issue 15, BENCHMARKS.md "Issue 15, session
// 4"). The tail cache answers such reads from memory: the positions of the
// last batches and their bytes, copied as they are appended.
//
// It answers only reads smaller than SendfileMin, those a fetch copies
// anyway; a larger one goes to the file, to be sent with sendfile, so the
// cache never puts a copy where there was none.
//
// It is kept only while reads use it: the first read of an active segment
// starts it (later appends fill it), and Maintain drops a cache no read
// has hit for idleClose, so a follower's partitions (nobody reads them)
// and idle ones hold none. It never holds more than tailMax bytes.
//
// INVARIANT: buf holds exactly the file's bytes [start, start+len(buf)),
// whole batches listed in batches, and start+len(buf) is the segment's
// size: every change of the file other than an append drops the cache
// (truncation, roll, deletion).

// tailMax bounds a tail cache's memory; when an append would exceed it,
// the oldest batches go until at most tailKeep bytes remain before the
// append.
const (
	tailMax  = 128 << 10
	tailKeep = tailMax / 2
)

type tailBatch struct {
	base, last int64 // offsets of the batch
	pos        int64 // position in the segment file
}

type tailCache struct {
	start   int64 // file position of buf[0]
	buf     []byte
	batches []tailBatch
	hitAt   int64 // unix nanoseconds of the last read it answered (or of its start)
}

// end is the file position just past the cached bytes.
func (t *tailCache) end() int64 { return t.start + int64(len(t.buf)) }

// add appends the bytes of one write (records at file position pos,
// holding batches bs) to the cache.
func (t *tailCache) add(records []byte, pos int64, bs []pendingBatch) {
	n := int64(len(records))
	if pos != t.end() || n > tailMax {
		// Not contiguous (cannot happen while the invariant holds) or
		// too large to keep: start over after this write.
		t.reset(pos + n)
		return
	}
	if int64(len(t.buf))+n > tailMax {
		t.trim(tailKeep - n)
	}
	t.buf = append(t.buf, records...)
	for _, b := range bs {
		t.batches = append(t.batches, tailBatch{base: b.h.BaseOffset, last: b.h.LastOffset(), pos: pos + int64(b.off)})
	}
}

// trim drops the oldest batches until at most keep bytes remain.
func (t *tailCache) trim(keep int64) {
	end := t.end()
	k := sort.Search(len(t.batches), func(i int) bool { return end-t.batches[i].pos <= keep })
	if k == len(t.batches) {
		t.reset(end)
		return
	}
	from := t.batches[k].pos
	t.buf = t.buf[:copy(t.buf, t.buf[from-t.start:])]
	t.batches = t.batches[:copy(t.batches, t.batches[k:])]
	t.start = from
}

func (t *tailCache) reset(end int64) {
	t.start, t.buf, t.batches = end, t.buf[:0], t.batches[:0]
}

// read answers Log.Read from the cache: the bytes of whole batches from
// the one holding offset, following ones while their base offset is below
// maxOffset and the total within maxBytes (the first batch whole). ok is
// false when the cache does not hold offset's batch; b is nil when there is
// nothing to read. The bytes are a copy.
func (t *tailCache) read(offset, maxBytes, maxOffset int64) (b []byte, ok bool) {
	bs := t.batches
	if len(bs) == 0 || offset < bs[0].base {
		return nil, false
	}
	k := sort.Search(len(bs), func(i int) bool { return bs[i].last >= offset })
	if k == len(bs) || bs[k].base >= maxOffset {
		return nil, true // nothing at or after offset yet
	}
	next := func(i int) int64 { // position just past batch i
		if i+1 < len(bs) {
			return bs[i+1].pos
		}
		return t.end()
	}
	first, stop := bs[k].pos, next(k) // KIP-74: the first batch whole
	for i := k + 1; i < len(bs) && bs[i].base < maxOffset && next(i)-first <= maxBytes; i++ {
		stop = next(i)
	}
	if stop-first >= SendfileMin {
		return nil, false // a zero-copy send from the file costs less
	}
	return append([]byte(nil), t.buf[first-t.start:stop-t.start]...), true
}

// readTail answers a read of the active segment s from its tail cache,
// starting the cache when there is none. ok is false when the read must
// go to the file.
func (s *segment) readTail(offset, maxBytes, maxOffset int64) (b []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active || s.deleted {
		return nil, false
	}
	now := time.Now().UnixNano()
	if s.tail == nil {
		s.tail = &tailCache{start: s.meta.size, hitAt: now}
		return nil, false
	}
	b, ok = s.tail.read(offset, maxBytes, maxOffset)
	if ok {
		s.tail.hitAt = now
	}
	if invariant.Enabled && ok && len(b) > 0 {
		// INVARIANT: the cache answers whole batches, the first holding
		// or following offset.
		h, err := record.ParseHeader(b)
		invariant.Check(err == nil && h.LastOffset() >= offset && int64(h.Size()) <= int64(len(b)),
			"segment %d: tail cache read at %d gave a bad first batch (%v)", s.base, offset, err)
	}
	return b, ok
}

// addTailLocked adds an append to the tail cache, if there is one.
// REQUIRES: s.mu.
func (s *segment) addTailLocked(records []byte, pos int64, bs []pendingBatch) {
	if s.tail != nil {
		s.tail.add(records, pos, bs)
	}
}

// dropTailIfIdleLocked drops a tail cache no read hit since idleBefore.
// REQUIRES: s.mu.
func (s *segment) dropTailIfIdleLocked(idleBefore int64) {
	if s.tail != nil && (s.tail.hitAt <= idleBefore || !s.active) {
		s.tail = nil
	}
}

// dropTail drops the tail cache (the file changed other than by an append).
func (s *segment) dropTail() {
	s.mu.Lock()
	s.tail = nil
	s.mu.Unlock()
}
