// Package recordtest builds valid RecordBatch v2 batches for tests in
// other packages. Records are encoded with franz-go's kmsg (what the
// franz-go client sends), compressed with record.Compress, and sealed
// with a correct length and CRC32C.
//
//	b := recordtest.Batch(record.CodecZstd,
//		recordtest.Rec{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000})
//
//	b = recordtest.Build(recordtest.Options{
//		Codec:    record.CodecLZ4,
//		Producer: &recordtest.Producer{ID: 7, Epoch: 1, BaseSequence: 42},
//	}, recs...)
package recordtest

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
)

// Rec is one record to put in a batch. A nil Key is a null key; a nil
// Value is a null value (a tombstone). Timestamp is absolute, in ms.
type Rec struct {
	Key, Value []byte
	Headers    []Header
	Timestamp  int64
}

// Header is a record header. Order and duplicates are kept.
type Header struct {
	Key   string
	Value []byte
}

// Producer holds the idempotent/transactional producer fields.
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// Options shape the batch header. The zero value (plus a codec) is what a
// non-idempotent client sends.
type Options struct {
	Codec record.Codec
	// BaseOffset is written as is; producers send 0.
	BaseOffset int64
	// PartitionLeaderEpoch is written as is; producers send -1, which
	// Build uses when this is 0.
	PartitionLeaderEpoch int32
	// Producer nil means producer ID, epoch and base sequence -1.
	Producer      *Producer
	Transactional bool
	Control       bool
	LogAppendTime bool
}

// Batch returns a batch of recs compressed with codec, with no producer.
// It panics on a codec record.Compress cannot write (a test bug).
func Batch(codec record.Codec, recs ...Rec) []byte {
	return Build(Options{Codec: codec}, recs...)
}

// Build returns a batch of recs shaped by o. The base timestamp is the
// first record's timestamp and the max timestamp the largest; offset
// deltas run 0..len(recs)-1. An empty recs yields a batch with zero
// records and lastOffsetDelta 0, which record.Validate rejects.
func Build(o Options, recs ...Rec) []byte {
	var baseTS, maxTS int64
	if len(recs) > 0 {
		baseTS, maxTS = recs[0].Timestamp, recs[0].Timestamp
	}
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
	}
	raw := EncodeRecords(baseTS, recs...)
	payload, err := record.Compress(o.Codec, raw)
	if err != nil {
		panic(fmt.Sprintf("recordtest: %v", err))
	}
	b := kmsg.RecordBatch{
		FirstOffset:          o.BaseOffset,
		PartitionLeaderEpoch: o.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           attributes(o),
		LastOffsetDelta:      int32(max(len(recs)-1, 0)),
		FirstTimestamp:       baseTS,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              payload,
	}
	if b.PartitionLeaderEpoch == 0 {
		b.PartitionLeaderEpoch = -1
	}
	if p := o.Producer; p != nil {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = p.ID, p.Epoch, p.BaseSequence
	}
	return Reseal(b.AppendTo(nil))
}

func attributes(o Options) int16 {
	a := int16(o.Codec) & 0x07
	if o.LogAppendTime {
		a |= 0x08
	}
	if o.Transactional {
		a |= 0x10
	}
	if o.Control {
		a |= 0x20
	}
	return a
}

// EncodeRecords returns the uncompressed records section for recs, with
// timestamp deltas from baseTimestamp and offset deltas 0, 1, 2, ...
func EncodeRecords(baseTimestamp int64, recs ...Rec) []byte {
	var out []byte
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.Timestamp - baseTimestamp,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		out = AppendRecord(out, kr)
	}
	return out
}

// AppendRecord appends r to dst with its Length field computed, so tests
// can build records with arbitrary deltas or attributes.
func AppendRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)[1:] // a zero varint length is one byte
	r.Length = int32(len(body))
	return r.AppendTo(dst)
}

// Reseal sets the batch length to len(batch)-12 and recomputes the CRC,
// after a test has edited the batch. It returns batch.
func Reseal(batch []byte) []byte {
	binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
	record.SetCRC(batch)
	return batch
}
