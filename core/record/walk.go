package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// rawRecord is one record decoded in place: its byte fields alias the
// records section. Decoding one allocates nothing.
type rawRecord struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	key, value     []byte // nil for a null key/value
	numHeaders     int32
	headers        []byte // the encoded headers, numHeaders of them
	size           int    // bytes consumed, length varint included
}

// Reasons a record fails to decode. They are static so that the hot path
// builds no error until it has to report one.
var (
	errVarint        = errors.New("bad varint")
	errRecordLength  = errors.New("record length exceeds the bytes left")
	errNegativeLen   = errors.New("negative length")
	errFieldOverrun  = errors.New("field overruns the record")
	errRecordTrailer = errors.New("record has bytes after its headers")
	errHeaderCount   = errors.New("header count invalid for the record size")
	errNullHeaderKey = errors.New("null header key")
)

// varlong decodes a zigzag varint as Kafka's varlong (int64). n is 0
// when b does not start with a valid one. The one-byte case inlines.
func varlong(b []byte) (v int64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	u, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0
	}
	return int64(u>>1) ^ -int64(u&1), n
}

// varint decodes a zigzag varint as Kafka's varint (int32): at most five
// bytes and within int32 range. n is 0 when b does not start with a
// valid one. The one-byte case inlines.
func varint(b []byte) (v int32, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		return int32(b[0]>>1) ^ -int32(b[0]&1), 1
	}
	return varintSlow(b)
}

func varintSlow(b []byte) (int32, int) {
	u, n := binary.Uvarint(b)
	if n <= 0 || n > 5 || u > math.MaxUint32 {
		return 0, 0
	}
	return int32(uint32(u>>1) ^ -uint32(u&1)), n
}

// bytesField decodes a varint length and that many bytes at b[p:]. Length
// -1 is null (nil). It returns the position after the field, or a
// negative position for bad input (see fieldErr).
func bytesField(b []byte, p int) ([]byte, int) {
	l, n := varint(b[p:])
	if n == 0 {
		return nil, badVarint
	}
	p += n
	switch {
	case l == -1:
		return nil, p
	case l < -1:
		return nil, badLength
	case int(l) > len(b)-p:
		return nil, badOverrun
	}
	return b[p : p+int(l) : p+int(l)], p + int(l)
}

// Negative positions bytesField returns for bad input.
const (
	badVarint = -1 - iota
	badLength
	badOverrun
)

func fieldErr(p int) error {
	switch p {
	case badVarint:
		return errVarint
	case badLength:
		return errNegativeLen
	}
	return errFieldOverrun
}

// parseRecord decodes the record at the start of b, checking its framing
// the way Kafka's DefaultRecord does: the length covers exactly the body,
// key and value lengths are -1 or more, header keys are not null, and
// nothing follows the last header.
func parseRecord(b []byte) (rawRecord, error) {
	var r rawRecord
	length, n := varint(b)
	if n == 0 {
		return r, errVarint
	}
	if length < 0 || int(length) > len(b)-n {
		return r, errRecordLength
	}
	r.size = n + int(length)
	body := b[n:r.size]
	if len(body) < 1 {
		return r, errFieldOverrun
	}
	r.attributes = int8(body[0])
	p := 1
	if r.timestampDelta, n = varlong(body[p:]); n == 0 {
		return r, errVarint
	}
	p += n
	if r.offsetDelta, n = varint(body[p:]); n == 0 {
		return r, errVarint
	}
	p += n
	if r.key, p = bytesField(body, p); p < 0 {
		return r, fieldErr(p)
	}
	if r.value, p = bytesField(body, p); p < 0 {
		return r, fieldErr(p)
	}
	if r.numHeaders, n = varint(body[p:]); n == 0 {
		return r, errVarint
	}
	p += n
	// Each header takes at least two bytes (two one-byte lengths).
	if r.numHeaders < 0 || int(r.numHeaders) > (len(body)-p)/2 {
		return r, errHeaderCount
	}
	start := p
	for range r.numHeaders {
		var k []byte
		if k, p = bytesField(body, p); p < 0 {
			return r, fieldErr(p)
		}
		if k == nil {
			return r, errNullHeaderKey
		}
		if _, p = bytesField(body, p); p < 0 {
			return r, fieldErr(p)
		}
	}
	r.headers = body[start:p:p]
	if p != len(body) {
		return r, errRecordTrailer
	}
	return r, nil
}

// nextHeader decodes the header at b[p:], already checked by parseRecord.
func nextHeader(b []byte, p int) (key, value []byte, next int) {
	key, p = bytesField(b, p)
	value, p = bytesField(b, p)
	return key, value, p
}

// recordErr describes a bad record i at byte pos of the records section.
func recordErr(i int, pos int, err error) error {
	return fmt.Errorf("record %d at byte %d of the records: %w", i, pos, err)
}
