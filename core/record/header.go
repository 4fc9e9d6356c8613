package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the size of a RecordBatch v2 header, up to and including
// the record count. Records follow it.
const HeaderSize = 61

// Byte offsets of the header fields within a batch. These are part of the
// wire and on-disk format and must not change.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthPrefix is the number of bytes before the part counted by
	// batchLength: baseOffset and batchLength themselves.
	lengthPrefix = 12
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Codec is a batch compression codec, as stored in the low three
// attribute bits.
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ErrCorrupt marks data that is not a valid record batch: a bad length,
// magic, CRC or record encoding. Check for it with errors.Is; the wrapped
// message says what is wrong.
var ErrCorrupt = errors.New("record: corrupt batch")

// ErrShort is returned when a buffer ends before the batch it starts does.
// On a log tail this means a torn write; in a request it is corruption.
var ErrShort = errors.New("record: batch truncated")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a decoded RecordBatch v2 header.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseHeader decodes the header at the start of b. It checks that the
// magic is 2 and that the batch length is plausible, but does not check
// that b holds the whole batch nor the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		if len(b) >= offMagic+1 && b[offMagic] != 2 {
			return Header{}, fmt.Errorf("%w: magic %d, want 2", ErrCorrupt, int8(b[offMagic]))
		}
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrShort, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}
	if h.Magic != 2 {
		return Header{}, fmt.Errorf("%w: magic %d, want 2", ErrCorrupt, h.Magic)
	}
	if h.BatchLength < HeaderSize-lengthPrefix {
		return Header{}, fmt.Errorf("%w: batch length %d below header size", ErrCorrupt, h.BatchLength)
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 {
		return Header{}, fmt.Errorf("%w: negative last offset delta %d or record count %d", ErrCorrupt, h.LastOffsetDelta, h.NumRecords)
	}
	return h, nil
}

// Size is the whole batch's size in bytes, header included.
func (h Header) Size() int { return lengthPrefix + int(h.BatchLength) }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec is the batch's compression codec.
func (h Header) Codec() Codec { return Codec(h.Attributes & attrCodecMask) }

// LogAppendTime reports whether the batch's timestamps are broker time.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports whether the batch is part of a transaction.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds control records (commit/abort markers).
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// Idempotent reports whether the batch was written by an idempotent producer.
func (h Header) Idempotent() bool { return h.ProducerID >= 0 }

// CheckCRC verifies the CRC32C of one whole batch. batch must hold exactly
// the batch (h.Size() bytes).
func CheckCRC(batch []byte) error {
	if len(batch) < HeaderSize {
		return fmt.Errorf("%w: %d bytes", ErrShort, len(batch))
	}
	want := binary.BigEndian.Uint32(batch[offCRC:])
	if got := crc32.Checksum(batch[offAttributes:], castagnoli); got != want {
		return fmt.Errorf("%w: crc %08x, header says %08x", ErrCorrupt, got, want)
	}
	return nil
}

// SetCRC recomputes and stores the CRC32C of one whole batch, after its
// covered bytes (attributes onwards) were changed.
func SetCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}

// SetBaseOffset rewrites the batch's base offset in place. The CRC does not
// cover it, so nothing else changes.
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch rewrites the partition leader epoch in place. The
// CRC does not cover it.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch's timestamps as broker time ts
// (milliseconds) by setting the timestamp-type bit and maxTimestamp, and
// recomputes the CRC, which covers both.
func SetLogAppendTime(batch []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(batch[offAttributes:]) | attrLogAppendTime
	be.PutUint16(batch[offAttributes:], attrs)
	be.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	SetCRC(batch)
}

// Next splits the first batch off buf. It returns the batch's header, its
// bytes (aliasing buf) and the rest of buf. A buffer that ends inside the
// batch yields ErrShort; a bad header yields ErrCorrupt. The CRC is not
// checked: call CheckCRC.
func Next(buf []byte) (h Header, batch, rest []byte, err error) {
	h, err = ParseHeader(buf)
	if err != nil {
		return Header{}, nil, buf, err
	}
	n := h.Size()
	if len(buf) < n {
		return Header{}, nil, buf, fmt.Errorf("%w: batch of %d bytes, %d present", ErrShort, n, len(buf))
	}
	return h, buf[:n:n], buf[n:], nil
}
