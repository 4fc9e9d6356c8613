package record

import "fmt"

// Record is one decoded record of a batch.
type Record struct {
	// Offset is the batch's base offset plus the record's offset delta.
	Offset int64
	// Timestamp is the base timestamp plus the record's delta, or the
	// batch's max timestamp when the batch uses LogAppendTime (as Kafka
	// consumers report it).
	Timestamp int64
	// Key and Value alias the batch, or the decompressed records of a
	// compressed batch; nil means null. Do not modify them.
	Key, Value []byte
	// Headers is nil when the record has none.
	Headers []RecordHeader
}

// RecordHeader is one record header. Value nil means null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records calls fn for each record of batch, which must hold exactly one
// batch, in order. It checks the batch length and CRC, decompresses with
// at most limit bytes (limit <= 0 means DefaultDecompressLimit) and
// checks each record's framing, failing with an error wrapping ErrCorrupt
// for bad bytes. Offset deltas need only increase, so compacted batches
// iterate. Key, Value and header values stay valid after Records returns.
// An error from fn stops the iteration and is returned unchanged.
func Records(batch []byte, limit int, fn func(Record) error) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if h.Size() != len(batch) {
		return fmt.Errorf("%w: batch length says %d bytes, have %d", ErrCorrupt, h.Size(), len(batch))
	}
	if err := CheckCRC(batch); err != nil {
		return err
	}
	if limit <= 0 {
		limit = DefaultDecompressLimit
	}
	data := batch[HeaderSize:]
	if c := h.Codec(); c != CodecNone {
		// A fresh buffer: records handed to fn may be kept.
		if data, err = Decompress(c, data, limit); err != nil {
			return err
		}
	}
	return walkRecords(h, data, fn)
}

func walkRecords(h Header, data []byte, fn func(Record) error) error {
	pos := 0
	prev := int32(-1)
	for i := range int(h.NumRecords) {
		if pos == len(data) {
			return fmt.Errorf("%w: header says %d records, found %d", ErrCorrupt, h.NumRecords, i)
		}
		r, err := parseRecord(data[pos:])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, recordErr(i, pos, err))
		}
		if r.offsetDelta <= prev || r.offsetDelta > h.LastOffsetDelta {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (last %d)", ErrCorrupt, i, r.offsetDelta, prev, h.LastOffsetDelta)
		}
		prev = r.offsetDelta
		if err := fn(toRecord(h, &r)); err != nil {
			return err
		}
		pos += r.size
	}
	if pos != len(data) {
		return fmt.Errorf("%w: %d bytes follow the %d records the header declares", ErrCorrupt, len(data)-pos, h.NumRecords)
	}
	return nil
}

func toRecord(h Header, r *rawRecord) Record {
	rec := Record{
		Offset:    h.BaseOffset + int64(r.offsetDelta),
		Timestamp: h.BaseTimestamp + r.timestampDelta,
		Key:       r.key,
		Value:     r.value,
	}
	if h.LogAppendTime() {
		rec.Timestamp = h.MaxTimestamp
	}
	if r.numHeaders > 0 {
		rec.Headers = make([]RecordHeader, r.numHeaders)
		for j, p := 0, 0; j < int(r.numHeaders); j++ {
			var k []byte
			k, rec.Headers[j].Value, p = nextHeader(r.headers, p)
			rec.Headers[j].Key = string(k)
		}
	}
	return rec
}
