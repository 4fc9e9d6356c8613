package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vltava/vltava/core/record"
)

// headerChunk is the size of one positioned read of the header scanner. It
// holds many headers of small batches, while a large batch costs one read
// for its header and none for its body.
const headerChunk = 4096

// headerScanner walks batch headers of a segment file with positioned reads
// of at most headerChunk bytes. It never reads a whole record body and never
// moves the file's shared offset.
type headerScanner struct {
	r      io.ReaderAt
	pos    int64 // position of the next batch
	end    int64 // bytes of the file that may be read
	buf    []byte
	bufOff int64 // file position of buf[0]
}

func newHeaderScanner(r io.ReaderAt, pos, end int64) *headerScanner {
	return &headerScanner{r: r, pos: pos, end: end, bufOff: -1}
}

// next returns the header of the batch at the scanner's position and that
// position, then moves past the batch. It returns io.EOF at end, and an
// error wrapping record.ErrShort or record.ErrCorrupt for a batch that is
// torn or whose header is invalid.
func (s *headerScanner) next() (record.Header, int64, error) {
	if s.pos >= s.end {
		return record.Header{}, s.pos, io.EOF
	}
	if s.end-s.pos < record.HeaderSize {
		return record.Header{}, s.pos, fmt.Errorf("%w: %d bytes at position %d", record.ErrShort, s.end-s.pos, s.pos)
	}
	if s.bufOff < 0 || s.pos < s.bufOff || s.pos+record.HeaderSize > s.bufOff+int64(len(s.buf)) {
		if err := s.fill(); err != nil {
			return record.Header{}, s.pos, err
		}
	}
	h, err := record.ParseHeader(s.buf[s.pos-s.bufOff:])
	if err != nil {
		return record.Header{}, s.pos, fmt.Errorf("position %d: %w", s.pos, err)
	}
	if int64(h.Size()) > s.end-s.pos {
		return record.Header{}, s.pos, fmt.Errorf("%w: batch of %d bytes at position %d, %d present", record.ErrShort, h.Size(), s.pos, s.end-s.pos)
	}
	p := s.pos
	s.pos += int64(h.Size())
	return h, p, nil
}

func (s *headerScanner) fill() error {
	n := min(int64(headerChunk), s.end-s.pos)
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, headerChunk)
	}
	s.buf = s.buf[:n]
	m, err := s.r.ReadAt(s.buf, s.pos)
	if m < record.HeaderSize {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: file ends at position %d", record.ErrShort, s.pos+int64(m))
		}
		s.bufOff = -1
		return fmt.Errorf("log: read header: %w", err)
	}
	s.buf = s.buf[:m]
	s.bufOff = s.pos
	return nil
}

// scanLimits are the offset rules a segment's batches must obey.
type scanLimits struct {
	minBase int64 // first batch's base offset must be >= this
	limit   int64 // every offset must be < this (next segment's base)
}

// validateSegment reads a segment file of size bytes from the start,
// checks every batch's header, CRC32C and offsets, and rebuilds the
// segment's metadata. It stops at the first bad batch: the returned meta
// covers the valid prefix (meta.size bytes) and bad describes why the rest
// was rejected (nil if the whole file is valid). err is an I/O error.
func validateSegment(r io.ReaderAt, size int64, base, interval int64, lim scanLimits) (meta segMeta, bad, err error) {
	return validateFrom(r, size, 0, newSegMeta(base, interval), lim)
}

// validateFrom is validateSegment from position start on, adding to meta,
// which describes the batches before start.
func validateFrom(r io.ReaderAt, size, start int64, meta segMeta, lim scanLimits) (_ segMeta, bad, err error) {
	base := meta.base
	br := bufio.NewReaderSize(io.NewSectionReader(r, start, size-start), 1<<20)
	var buf []byte
	expect := max(lim.minBase, base)
	for pos := start; pos < size; {
		hb, perr := br.Peek(record.HeaderSize)
		if len(hb) < record.HeaderSize {
			if perr != nil && !errors.Is(perr, io.EOF) {
				return meta, nil, fmt.Errorf("log: read segment %d: %w", base, perr)
			}
			return meta, fmt.Errorf("%w: %d trailing bytes at position %d", record.ErrShort, size-pos, pos), nil
		}
		h, herr := record.ParseHeader(hb)
		if herr != nil {
			return meta, fmt.Errorf("position %d: %w", pos, herr), nil
		}
		n := int64(h.Size())
		if n > size-pos {
			return meta, fmt.Errorf("%w: batch of %d bytes at position %d, %d present", record.ErrShort, n, pos, size-pos), nil
		}
		if oerr := checkBatchOffsets(h, expect, lim.limit, base); oerr != nil {
			return meta, fmt.Errorf("position %d: %w", pos, oerr), nil
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, rerr := io.ReadFull(br, buf); rerr != nil {
			return meta, nil, fmt.Errorf("log: read segment %d: %w", base, rerr)
		}
		if cerr := record.CheckCRC(buf); cerr != nil {
			return meta, fmt.Errorf("position %d: %w", pos, cerr), nil
		}
		meta.add(h, pos)
		expect = h.LastOffset() + 1
		pos += n
	}
	return meta, nil, nil
}

// checkBatchOffsets checks that a stored batch continues the segment: its
// offsets start at or after expect, stay below limit, and fit relative to
// the segment base.
func checkBatchOffsets(h record.Header, expect, limit, base int64) error {
	switch {
	case h.BaseOffset < expect:
		return fmt.Errorf("%w: base offset %d, expected >= %d", record.ErrCorrupt, h.BaseOffset, expect)
	case h.LastOffset() >= limit:
		return fmt.Errorf("%w: last offset %d reaches next segment %d", record.ErrCorrupt, h.LastOffset(), limit)
	case h.LastOffset()-base > math.MaxInt32:
		return fmt.Errorf("%w: offset %d too far from segment base %d", record.ErrCorrupt, h.LastOffset(), base)
	}
	return nil
}

// scanHeaders rebuilds segment metadata from batch headers only (no CRC),
// for files that are trusted but whose indexes are missing or damaged.
// It fails on a torn or invalid header.
func scanHeaders(r io.ReaderAt, size, base, interval int64) (segMeta, error) {
	meta := newSegMeta(base, interval)
	s := newHeaderScanner(r, 0, size)
	for {
		h, pos, err := s.next()
		if errors.Is(err, io.EOF) {
			return meta, nil
		}
		if err != nil {
			return meta, err
		}
		meta.add(h, pos)
	}
}
