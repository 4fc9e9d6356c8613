package log

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/vltava/vltava/core/record"
)

// attrDeleteHorizon is the batch attribute bit (KIP-534) saying the base
// timestamp holds the delete horizon: the time after which the cleaner may
// drop the batch's tombstones.
const attrDeleteHorizon = 0x40

// Batch header fields rewritten by the cleaner (offsets within a batch).
const (
	hdrBatchLength   = 8
	hdrAttributes    = 21
	hdrBaseTimestamp = 27
	hdrNumRecords    = 57
)

// keyDigest is the cleaner's fixed-size stand-in for a record key: 128
// bits from two seeded hashes, so two keys collide (and the older one's
// record would wrongly go) with probability about n²/2¹²⁹ per pass.
type keyDigest [2]uint64

// digester hashes keys with seeds chosen per pass.
type digester struct{ s1, s2 maphash.Seed }

func newDigester() digester { return digester{maphash.MakeSeed(), maphash.MakeSeed()} }

func (d digester) sum(key []byte) keyDigest {
	return keyDigest{maphash.Bytes(d.s1, key), maphash.Bytes(d.s2, key)}
}

// rawRec is one record of a batch as the cleaner sees it: its bytes and the
// fields that decide whether it survives.
type rawRec struct {
	raw       []byte // the whole record, length varint included
	tsOff     int    // position of the timestampDelta in raw
	tsLen     int    // its encoded length
	tsDelta   int64
	offDelta  int32
	key       []byte // nil for a null key
	tombstone bool
}

// splitRecords cuts a batch's (decompressed) records section into records.
// The batch passed its CRC check, so errors mean a writer bug, reported as
// corruption.
func splitRecords(recs []rawRec, data []byte, n int32) ([]rawRec, error) {
	recs = slices.Grow(recs[:0], int(max(n, 0)))
	for i := int32(0); i < n; i++ {
		r, err := parseRawRec(data)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", record.ErrCorrupt, i, err)
		}
		recs = append(recs, r)
		data = data[len(r.raw):]
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the records", record.ErrCorrupt, len(data))
	}
	return recs, nil
}

func parseRawRec(b []byte) (rawRec, error) {
	var r rawRec
	length, n := binary.Varint(b)
	if n <= 0 || length < 1 || length > int64(len(b)-n) {
		return r, fmt.Errorf("bad record length")
	}
	r.raw = b[:n+int(length)]
	p := n + 1 // skip attributes
	r.tsOff = p
	ts, m := binary.Varint(r.raw[p:])
	if m <= 0 {
		return r, fmt.Errorf("bad timestamp delta")
	}
	r.tsDelta, r.tsLen = ts, m
	p += m
	od, m := binary.Varint(r.raw[p:])
	if m <= 0 {
		return r, fmt.Errorf("bad offset delta")
	}
	r.offDelta = int32(od)
	p += m
	var ok bool
	if r.key, p, ok = rawBytes(r.raw, p); !ok {
		return r, fmt.Errorf("bad key")
	}
	vl, m := binary.Varint(r.raw[p:])
	if m <= 0 {
		return r, fmt.Errorf("bad value length")
	}
	r.tombstone = vl < 0
	return r, nil
}

// rawBytes decodes a varint-length byte field at b[p:]; nil for null.
func rawBytes(b []byte, p int) ([]byte, int, bool) {
	l, m := binary.Varint(b[p:])
	if m <= 0 || l < -1 || l > int64(len(b)-p-m) {
		return nil, 0, false
	}
	p += m
	if l < 0 {
		return nil, p, true
	}
	return b[p : p+int(l)], p + int(l), true
}

// appendRetimed appends r with its timestamp delta rebased by shift (the old
// base timestamp minus the new one), re-encoding the length prefix.
func appendRetimed(dst []byte, r rawRec, shift int64) []byte {
	_, n := binary.Varint(r.raw)
	body := r.raw[n:]
	var ts [binary.MaxVarintLen64]byte
	tn := binary.PutVarint(ts[:], r.tsDelta+shift)
	bodyLen := len(body) - r.tsLen + tn
	dst = binary.AppendVarint(dst, int64(bodyLen))
	dst = append(dst, body[0]) // attributes
	dst = append(dst, ts[:tn]...)
	return append(dst, r.raw[r.tsOff+r.tsLen:]...)
}

// batchDecision says what the cleaner does with one batch.
type batchDecision struct {
	keep    []rawRec // surviving records
	horizon int64    // delete horizon to stamp, or 0 to keep the header's
	retain  bool     // write the batch even with no records (producer state)
}

// rebuildBatch writes a batch spanning the original's offsets with only
// d.keep, recompressed with the original codec. An empty batch is written
// uncompressed, as Kafka writes an empty batch header.
func rebuildBatch(dst, orig []byte, h record.Header, d batchDecision) ([]byte, error) {
	attrs := uint16(h.Attributes)
	baseTs := h.BaseTimestamp
	shift := int64(0)
	if d.horizon > 0 {
		attrs |= attrDeleteHorizon
		shift = baseTs - d.horizon
		baseTs = d.horizon
	}
	var recs []byte
	for _, r := range d.keep {
		if shift != 0 {
			recs = appendRetimed(recs, r, shift)
		} else {
			recs = append(recs, r.raw...)
		}
	}
	if len(d.keep) == 0 {
		attrs &^= 0x07
	} else if c := h.Codec(); c != record.CodecNone {
		var err error
		if recs, err = record.Compress(c, recs); err != nil {
			return dst, fmt.Errorf("log: clean: recompress: %w", err)
		}
	}
	at := len(dst)
	dst = append(dst, orig[:record.HeaderSize]...)
	dst = append(dst, recs...)
	b := dst[at:]
	be := binary.BigEndian
	be.PutUint32(b[hdrBatchLength:], uint32(len(b)-12))
	be.PutUint16(b[hdrAttributes:], attrs)
	be.PutUint64(b[hdrBaseTimestamp:], uint64(baseTs))
	be.PutUint32(b[hdrNumRecords:], uint32(len(d.keep)))
	record.SetCRC(b)
	return dst, nil
}

// hasHorizon reports whether the batch carries a delete horizon, and it.
func hasHorizon(h record.Header) (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}
