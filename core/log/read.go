package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/vltava/vltava/core/record"
)

// Slice is a byte range of one segment file holding whole batches. It keeps
// the file open until Close, even if the segment is closed or deleted
// meanwhile. Read it only with positioned I/O (ReadAt, sendfile with an
// explicit offset): the file's shared offset belongs to nobody.
type Slice struct {
	f      *segFile // nil for an empty slice or one in memory
	mem    []byte   // the bytes of a slice read from memory (tail.go)
	pos, n int64
	closed atomic.Bool
}

// File returns the segment file for zero-copy sends; nil if Len is 0 or
// the slice was read from memory (then Bytes costs no file read).
func (s *Slice) File() *os.File {
	if s.f == nil {
		return nil
	}
	return s.f.f
}

// Pos returns the slice's position in File.
func (s *Slice) Pos() int64 { return s.pos }

// Len returns the slice's length in bytes.
func (s *Slice) Len() int64 { return s.n }

// Bytes appends the slice's bytes to dst. Given an empty dst it may
// return memory of the slice's own, which it does not use again.
func (s *Slice) Bytes(dst []byte) ([]byte, error) {
	if s.n == 0 {
		return dst, nil
	}
	if s.closed.Load() {
		return dst, ErrClosed
	}
	if s.f == nil {
		if len(dst) == 0 {
			return s.mem, nil
		}
		return append(dst, s.mem...), nil
	}
	off := len(dst)
	dst = append(dst, make([]byte, s.n)...)
	if _, err := s.f.f.ReadAt(dst[off:], s.pos); err != nil {
		return dst[:off], fmt.Errorf("log: read slice: %w", err)
	}
	return dst, nil
}

// WriteTo copies the slice to w with positioned reads (the copy path, for
// TLS connections and tests).
func (s *Slice) WriteTo(w io.Writer) (int64, error) {
	if s.n == 0 {
		return 0, nil
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.f == nil {
		n, err := w.Write(s.mem)
		return int64(n), err
	}
	return io.Copy(w, io.NewSectionReader(s.f.f, s.pos, s.n))
}

// Close releases the slice's reference to the file. It is idempotent.
func (s *Slice) Close() error {
	if s.f == nil || !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.f.release()
}

// retries bounds how often a read re-resolves an offset whose segment was
// deleted under it.
const retries = 3

// Read returns whole batches from one segment, starting with the batch
// containing offset and adding following batches while their base offset
// is below maxOffset (exclusive, the high watermark) and the total stays
// within maxBytes. The first batch is included whole even if larger than
// maxBytes (KIP-74). The slice is empty when offset is maxOffset or the
// log end offset. Offsets below the log start or beyond the log end give
// ErrOffsetOutOfRange. The caller must Close the slice.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (*Slice, error) {
	for attempt := 0; ; attempt++ {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return nil, ErrClosed
		}
		if l.failed != nil {
			err := l.failed
			l.mu.RUnlock()
			return nil, err
		}
		if offset < l.start || offset > l.end {
			err := fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.start, l.end)
			l.mu.RUnlock()
			return nil, err
		}
		if offset == l.end || offset >= maxOffset {
			l.mu.RUnlock()
			return &Slice{}, nil
		}
		i, _ := l.segmentForLocked(offset)
		segs, interval := l.segs[i:], int64(l.cfg.IndexIntervalBytes)
		l.mu.RUnlock()
		s, err := readSegments(segs, offset, int64(maxBytes), maxOffset, interval)
		if errors.Is(err, errSegmentGone) && attempt < retries {
			continue
		}
		return s, err
	}
}

// SendfileMin is the smallest read worth sending from its file with
// sendfile (the file pinned until the response is written): a fetch
// copies smaller ones into its response (core/broker), and the tail cache
// (tail.go) answers only those.
const SendfileMin = 16 << 10

// readSegments reads from the first segment of segs with a batch at or
// after offset below maxOffset.
func readSegments(segs []*segment, offset, maxBytes, maxOffset, interval int64) (*Slice, error) {
	if len(segs) == 1 { // the active segment: a tailing read (tail.go)
		if b, ok := segs[0].readTail(offset, maxBytes, maxOffset); ok {
			return &Slice{mem: b, n: int64(len(b))}, nil
		}
	}
	return readFiles(segs, offset, maxBytes, maxOffset, interval)
}

// readFiles is readSegments from the segment files.
func readFiles(segs []*segment, offset, maxBytes, maxOffset, interval int64) (*Slice, error) {
	for _, seg := range segs {
		rel := uint32(0)
		if offset > seg.base {
			rel = uint32(offset - seg.base)
		}
		sf, pos, size, err := seg.view(rel, interval)
		if err != nil {
			return nil, err
		}
		first, n, done, err := scanRange(sf.f, pos, size, offset, maxBytes, maxOffset)
		if err != nil {
			sf.release()
			return nil, fmt.Errorf("log: segment %d: %w", seg.base, err)
		}
		if n > 0 {
			return &Slice{f: sf, pos: first, n: n}, nil
		}
		sf.release()
		if done {
			break
		}
	}
	return &Slice{}, nil
}

// scanRange walks headers from pos to find the first batch whose last
// offset is >= offset, then extends the range over following batches. done
// reports that no later segment can contribute (a batch at or beyond
// maxOffset was seen).
func scanRange(r io.ReaderAt, pos, size, offset, maxBytes, maxOffset int64) (first, n int64, done bool, err error) {
	sc := newHeaderScanner(r, pos, size)
	first = -1
	for {
		h, p, err := sc.next()
		if errors.Is(err, io.EOF) {
			return first, n, first >= 0, nil
		}
		if err != nil {
			return 0, 0, false, err
		}
		if h.BaseOffset >= maxOffset {
			return first, n, true, nil
		}
		sz := int64(h.Size())
		switch {
		case first < 0 && h.LastOffset() < offset:
			continue
		case first < 0:
			first, n = p, sz // KIP-74: always whole, even beyond maxBytes
		case n+sz > maxBytes:
			return first, n, true, nil
		default:
			n += sz
		}
	}
}

// OffsetForTime implements ListOffsets by timestamp as Kafka defines it:
// the offset and timestamp of the first record (in offset order, at or
// after the log start) whose timestamp is >= ts. The time index and the
// batch headers' max timestamps find the first batch that can hold such a
// record; only that batch is decoded. It returns (-1, -1, nil) if no record
// qualifies.
func (l *Log) OffsetForTime(ts int64) (offset, timestamp int64, err error) {
	for attempt := 0; ; attempt++ {
		offset, timestamp, err = l.offsetForTime(ts)
		if !errors.Is(err, errSegmentGone) || attempt >= retries {
			return offset, timestamp, err
		}
	}
}

func (l *Log) offsetForTime(ts int64) (int64, int64, error) {
	l.mu.RLock()
	closed, start, segs, interval := l.closed, l.start, l.segs, int64(l.cfg.IndexIntervalBytes)
	l.mu.RUnlock()
	if closed {
		return -1, -1, ErrClosed
	}
	for _, seg := range segs {
		if size, maxTs, maxOff := seg.stats(); size == 0 || maxOff < 0 || maxTs < ts {
			continue
		}
		sf, pos, size, err := seg.timeView(ts, interval)
		if err != nil {
			return -1, -1, err
		}
		sc := newHeaderScanner(sf.f, pos, size)
		for {
			h, pos, err := sc.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				sf.release()
				return -1, -1, fmt.Errorf("log: segment %d: %w", seg.base, err)
			}
			if h.MaxTimestamp < ts || h.LastOffset() < start {
				continue
			}
			off, at, err := firstRecordAtOrAfter(sf.f, pos, h, ts, start)
			if err != nil || off >= 0 {
				sf.release()
				if err != nil {
					err = fmt.Errorf("log: segment %d: %w", seg.base, err)
				}
				return off, at, err
			}
		}
		sf.release()
	}
	return -1, -1, nil
}

// errStopWalk ends a record walk early.
var errStopWalk = errors.New("log: stop walk")

// firstRecordAtOrAfter decodes the batch with header h at pos in f and
// returns the offset and timestamp of its first record with timestamp >=
// ts and offset >= start, or (-1, -1, nil) if none has both.
func firstRecordAtOrAfter(f io.ReaderAt, pos int64, h record.Header, ts, start int64) (int64, int64, error) {
	batch := make([]byte, h.Size())
	if _, err := f.ReadAt(batch, pos); err != nil {
		return -1, -1, fmt.Errorf("reading batch at position %d: %w", pos, err)
	}
	off, at := int64(-1), int64(-1)
	err := record.Records(batch, 0, func(r record.Record) error {
		if r.Timestamp >= ts && r.Offset >= start {
			off, at = r.Offset, r.Timestamp
			return errStopWalk
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return -1, -1, fmt.Errorf("batch at position %d: %w", pos, err)
	}
	return off, at, nil
}

// MaxTimestamp returns the largest record timestamp in the log and the
// offset of the first record carrying it, for ListOffsets MAX_TIMESTAMP
// (KIP-734, with KAFKA-16310's record offset). Segment metadata finds the
// batch; only that batch is decoded. It returns (-1, -1) when empty.
func (l *Log) MaxTimestamp() (timestamp, offset int64) {
	l.mu.RLock()
	start, end, segs, interval := l.start, l.end, l.segs, int64(l.cfg.IndexIntervalBytes)
	l.mu.RUnlock()
	if start == end {
		return -1, -1
	}
	var best *segment
	timestamp, offset = -1, -1
	for _, seg := range segs {
		if _, ts, off := seg.stats(); off >= 0 && (offset < 0 || ts > timestamp) {
			best, timestamp, offset = seg, ts, off
		}
	}
	if best == nil {
		return -1, -1
	}
	if off, err := recordOffsetOf(best, offset, timestamp, start, interval); err == nil && off >= 0 {
		return timestamp, off
	}
	return timestamp, max(offset, start) // batch granularity if the batch cannot be read
}

// recordOffsetOf finds the batch based at batchBase in seg and returns the
// offset of its first record with timestamp >= ts at or after start.
func recordOffsetOf(seg *segment, batchBase, ts, start, interval int64) (int64, error) {
	sf, pos, size, err := seg.view(uint32(batchBase-seg.base), interval)
	if err != nil {
		return -1, err
	}
	defer sf.release()
	sc := newHeaderScanner(sf.f, pos, size)
	for {
		h, p, err := sc.next()
		if err != nil {
			return -1, err
		}
		if h.BaseOffset == batchBase {
			off, _, err := firstRecordAtOrAfter(sf.f, p, h, ts, start)
			return off, err
		}
	}
}
