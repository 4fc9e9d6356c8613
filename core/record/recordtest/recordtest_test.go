package recordtest_test

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

var codecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

func TestBatchDecodesWithKmsg(t *testing.T) {
	recs := []recordtest.Rec{
		{Key: []byte("k0"), Value: []byte("v0"), Timestamp: 1000},
		{Key: nil, Value: []byte("v1"), Timestamp: 900, Headers: []recordtest.Header{{Key: "h", Value: []byte("x")}, {Key: "h", Value: nil}}},
		{Key: []byte("k2"), Value: nil, Timestamp: 1500},
	}
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			b := recordtest.Batch(c, recs...)
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			if kb.Magic != 2 || kb.NumRecords != 3 || kb.LastOffsetDelta != 2 || kb.ProducerID != -1 ||
				kb.FirstSequence != -1 || kb.PartitionLeaderEpoch != -1 || kb.FirstTimestamp != 1000 || kb.MaxTimestamp != 1500 {
				t.Fatalf("header %+v", kb)
			}
			if record.Codec(kb.Attributes&7) != c {
				t.Fatalf("attributes %x", kb.Attributes)
			}
			if int(kb.Length) != len(b)-12 {
				t.Fatalf("length %d, batch %d bytes", kb.Length, len(b))
			}
			raw, err := record.Decompress(c, kb.Records, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range recs {
				var kr kmsg.Record
				if err := kr.ReadFrom(raw); err != nil {
					t.Fatal(err)
				}
				if kr.OffsetDelta != int32(i) || kr.TimestampDelta64 != want.Timestamp-1000 ||
					!bytes.Equal(kr.Key, want.Key) || (kr.Key == nil) != (want.Key == nil) ||
					!bytes.Equal(kr.Value, want.Value) || (kr.Value == nil) != (want.Value == nil) ||
					len(kr.Headers) != len(want.Headers) {
					t.Fatalf("record %d: %+v", i, kr)
				}
				raw = raw[len(recordtest.AppendRecord(nil, kr)):]
			}
			if len(raw) != 0 {
				t.Fatalf("%d trailing bytes", len(raw))
			}
			if _, err := record.Validate(b, record.ValidateOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBuildOptions(t *testing.T) {
	b := recordtest.Build(recordtest.Options{
		Codec:                record.CodecLZ4,
		BaseOffset:           77,
		PartitionLeaderEpoch: 5,
		Producer:             &recordtest.Producer{ID: 9, Epoch: 3, BaseSequence: 40},
		Transactional:        true,
		LogAppendTime:        true,
	}, recordtest.Rec{Value: []byte("a")})
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 77 || h.PartitionLeaderEpoch != 5 || h.ProducerID != 9 || h.ProducerEpoch != 3 ||
		h.BaseSequence != 40 || !h.Transactional() || !h.LogAppendTime() || h.Control() || h.Codec() != record.CodecLZ4 {
		t.Fatalf("header %+v", h)
	}
	if err := record.CheckCRC(b); err != nil {
		t.Fatal(err)
	}
	if _, err := record.Validate(b, record.ValidateOptions{Internal: true}); err != nil {
		t.Fatal(err)
	}
}

func TestResealFixesCRC(t *testing.T) {
	b := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("abc")})
	b[len(b)-1] = 'X'
	if err := record.CheckCRC(b); err == nil {
		t.Fatal("edited batch passed the CRC check")
	}
	if err := record.CheckCRC(recordtest.Reseal(b)); err != nil {
		t.Fatal(err)
	}
}
