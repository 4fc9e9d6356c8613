package record

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Control record types (the key's type field, KIP-98).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// Batch attribute bits of a transaction marker: transactional and control.
const markerAttributes = attrTransactional | attrControl

// errNotControl is returned by ControlType for a batch that is not a
// control batch.
var errNotControl = errors.New("record: not a control batch")

// MarkerBatch builds a transaction marker (an end-transaction control
// batch) for producerID at epoch: one record whose key is the control
// record key {version 0, type} and whose value is the EndTxnMarker
// {version 0, coordinatorEpoch}, base offset 0 and sequence -1, as Kafka
// writes it. ts is the batch timestamp in milliseconds.
func MarkerBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, ts int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: kmsg.ControlRecordKeyType(typ)}).AppendTo(nil)
	val := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: coordinatorEpoch}).AppendTo(nil)
	rec := kmsg.Record{Key: key, Value: val}
	body := rec.AppendTo(nil)[1:] // length 0 encodes as one byte
	rec.Length = int32(len(body))
	recs := rec.AppendTo(nil)
	b := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: markerAttributes, LastOffsetDelta: 0,
		FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: producerID, ProducerEpoch: epoch, FirstSequence: -1,
		NumRecords: 1, Records: recs,
	}
	b.Length = int32(HeaderSize - lengthPrefix + len(recs))
	out := b.AppendTo(nil)
	SetCRC(out)
	return out
}

// ControlType returns the control record type (ControlAbort,
// ControlCommit or another) of a control batch's first record. batch must
// hold the whole batch; its CRC is not checked.
func ControlType(batch []byte) (int16, error) {
	typ, _, err := ControlMarker(batch)
	return typ, err
}

// ControlMarker is ControlType that also returns the coordinator epoch of
// a transaction marker's value (-1 when the value is not an EndTxnMarker).
func ControlMarker(batch []byte) (int16, int32, error) {
	typ, r, err := controlRecord(batch)
	if err != nil {
		return -1, -1, err
	}
	var m kmsg.EndTxnMarker
	if (typ != ControlAbort && typ != ControlCommit) || m.ReadFrom(r.value) != nil {
		return typ, -1, nil
	}
	return typ, m.CoordinatorEpoch, nil
}

func controlRecord(batch []byte) (int16, rawRecord, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return -1, rawRecord{}, err
	}
	if !h.Control() {
		return -1, rawRecord{}, errNotControl
	}
	if h.Size() > len(batch) {
		return -1, rawRecord{}, fmt.Errorf("%w: control batch of %d bytes, have %d", ErrShort, h.Size(), len(batch))
	}
	if h.Codec() != CodecNone || h.NumRecords < 1 {
		return -1, rawRecord{}, fmt.Errorf("%w: control batch with codec %v and %d records", ErrCorrupt, h.Codec(), h.NumRecords)
	}
	r, err := parseRecord(batch[HeaderSize:h.Size()])
	if err != nil {
		return -1, rawRecord{}, fmt.Errorf("%w: control record: %w", ErrCorrupt, err)
	}
	var k kmsg.ControlRecordKey
	if err := k.ReadFrom(r.key); err != nil {
		return -1, rawRecord{}, fmt.Errorf("%w: control record key: %w", ErrCorrupt, err)
	}
	return int16(k.Type), r, nil
}
