package log

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/record"
)

// Entry sizes of the index files. Part of the on-disk format.
const (
	offsetEntrySize = 8  // relOffset uint32, position uint32
	timeEntrySize   = 12 // timestamp int64, relOffset uint32
)

// offsetEntry maps the base offset of an indexed batch (relative to the
// segment's base offset) to the batch's byte position in the .log file.
type offsetEntry struct {
	rel uint32
	pos uint32
}

// timeEntry records that the largest batch max timestamp seen in the segment
// up to and including the batch at rel is ts, and that the batch at rel is
// the first batch to reach it.
type timeEntry struct {
	ts  int64
	rel uint32
}

// lookupOffset returns the position of the last indexed batch whose base
// offset is <= rel, or 0 when there is none (scan from the segment start).
func lookupOffset(idx []offsetEntry, rel uint32) int64 {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].rel > rel })
	if i == 0 {
		return 0
	}
	return int64(idx[i-1].pos)
}

// lookupTime returns the relative offset of the last entry whose timestamp
// is < ts. Every batch up to and including that one has a max timestamp
// below ts, so a search for ts may start there. ok is false if no entry
// qualifies (start at the segment beginning).
func lookupTime(tidx []timeEntry, ts int64) (rel uint32, ok bool) {
	i := sort.Search(len(tidx), func(i int) bool { return tidx[i].ts >= ts })
	if i == 0 {
		return 0, false
	}
	return tidx[i-1].rel, true
}

func encodeOffsetEntries(dst []byte, es []offsetEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
		dst = binary.BigEndian.AppendUint32(dst, e.pos)
	}
	return dst
}

func encodeTimeEntries(dst []byte, es []timeEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
	}
	return dst
}

// decodeOffsetIndex parses and checks a .index file against the size of its
// .log file.
// INVARIANT: rel and pos strictly increase and every pos < logSize.
func decodeOffsetIndex(b []byte, logSize int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: offset index of %d bytes", record.ErrCorrupt, len(b))
	}
	es := make([]offsetEntry, 0, len(b)/offsetEntrySize)
	for i := 0; i < len(b); i += offsetEntrySize {
		e := offsetEntry{binary.BigEndian.Uint32(b[i:]), binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos) >= logSize {
			return nil, fmt.Errorf("%w: offset index position %d beyond log size %d", record.ErrCorrupt, e.pos, logSize)
		}
		if n := len(es); n > 0 && (e.rel <= es[n-1].rel || e.pos <= es[n-1].pos) {
			return nil, fmt.Errorf("%w: offset index not increasing at entry %d", record.ErrCorrupt, n)
		}
		es = append(es, e)
	}
	return es, nil
}

// decodeTimeIndex parses and checks a .timeindex file.
// INVARIANT: ts strictly increases and rel never decreases.
func decodeTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: time index of %d bytes", record.ErrCorrupt, len(b))
	}
	es := make([]timeEntry, 0, len(b)/timeEntrySize)
	for i := 0; i < len(b); i += timeEntrySize {
		e := timeEntry{int64(binary.BigEndian.Uint64(b[i:])), binary.BigEndian.Uint32(b[i+8:])}
		if n := len(es); n > 0 && (e.ts <= es[n-1].ts || e.rel < es[n-1].rel) {
			return nil, fmt.Errorf("%w: time index not increasing at entry %d", record.ErrCorrupt, n)
		}
		es = append(es, e)
	}
	return es, nil
}

// segMeta is what a segment knows about its batches: the sparse indexes and
// the running state needed to extend them. It is built the same way by
// Append and by every rebuild, so a rebuilt index equals the appended one.
type segMeta struct {
	base     int64 // segment base offset
	interval int64 // index.interval.bytes used when entries were added

	index  []offsetEntry
	tindex []timeEntry

	since    int64 // log bytes since the last offset index entry
	maxTs    int64 // largest batch max timestamp, -1 if none
	maxTsOff int64 // base offset of the first batch reaching maxTs, -1 if none
	firstTs  int64 // max timestamp of the first batch, -1 if empty
	next     int64 // last offset of the last batch + 1, base if empty
	size     int64 // bytes of whole batches
}

func newSegMeta(base int64, interval int64) segMeta {
	return segMeta{base: base, interval: interval, maxTs: -1, maxTsOff: -1, firstTs: -1, next: base}
}

// add accounts for the batch with header h (offsets already assigned) at
// position pos. It follows Kafka: a batch is indexed when more than
// interval bytes were appended since the previous entry.
func (m *segMeta) add(h record.Header, pos int64) {
	if invariant.Enabled {
		// INVARIANT (doc.go, segment file): offsets increase, the first
		// batch at or after the segment base, each after the previous
		// one's last offset; batches follow each other; relative offsets
		// and positions fit 32 bits.
		invariant.Check(h.BaseOffset >= m.next && h.LastOffset() >= h.BaseOffset,
			"segment %d: batch [%d, %d] after offset %d", m.base, h.BaseOffset, h.LastOffset(), m.next-1)
		invariant.Check(pos >= m.size, "segment %d: batch at position %d inside the previous one (size %d)", m.base, pos, m.size)
		invariant.Check(m.fits(h.LastOffset(), pos+int64(h.Size())), "segment %d: batch [%d, %d] at %d overflows 32-bit offsets or positions", m.base, h.BaseOffset, h.LastOffset(), pos)
	}
	if m.maxTsOff < 0 || h.MaxTimestamp > m.maxTs {
		m.maxTs, m.maxTsOff = h.MaxTimestamp, h.BaseOffset
	}
	if m.firstTs < 0 && m.size == 0 {
		m.firstTs = h.MaxTimestamp
	}
	if m.since > m.interval {
		e := offsetEntry{uint32(h.BaseOffset - m.base), uint32(pos)}
		if n := len(m.index); invariant.Enabled && n > 0 {
			// INVARIANT (doc.go, offset index): relOffset and position
			// strictly increase.
			invariant.Check(e.rel > m.index[n-1].rel && e.pos > m.index[n-1].pos,
				"segment %d: offset index entry %+v after %+v", m.base, e, m.index[n-1])
		}
		m.index = append(m.index, e)
		m.maybeAddTime()
		m.since = 0
	}
	m.since += int64(h.Size())
	m.size = pos + int64(h.Size())
	m.next = h.LastOffset() + 1
}

// maybeAddTime appends a time entry for the running maximum if it grew.
func (m *segMeta) maybeAddTime() {
	if m.maxTsOff < 0 {
		return
	}
	if n := len(m.tindex); n == 0 || m.maxTs > m.tindex[n-1].ts {
		e := timeEntry{m.maxTs, uint32(m.maxTsOff - m.base)}
		if invariant.Enabled && n > 0 {
			// INVARIANT (doc.go, time index): ts strictly increases and
			// relOffset never decreases.
			invariant.Check(e.rel >= m.tindex[n-1].rel, "segment %d: time index entry %+v after %+v", m.base, e, m.tindex[n-1])
		}
		m.tindex = append(m.tindex, e)
	}
}

// fits reports whether a batch ending at lastOffset and growing the segment
// to newSize can still be addressed by 32-bit relative offsets and positions.
func (m *segMeta) fits(lastOffset, newSize int64) bool {
	return lastOffset-m.base <= math.MaxInt32 && newSize <= math.MaxUint32
}
