package record_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// Recompress re-encodes every codec into every other: the result
// validates, reads back as the same records, keeps the header's producer
// and transactional fields, and carries the new codec.
func TestRecompress(t *testing.T) {
	var recs []recordtest.Rec
	for i := range 50 {
		recs = append(recs, recordtest.Rec{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprintf("value %03d of the batch", i)),
			Headers: []recordtest.Header{{Key: "h", Value: []byte("x")}}, Timestamp: 1_700_000_000_000 + int64(i)})
	}
	read := func(t *testing.T, b []byte) []record.Record {
		var out []record.Record
		if err := record.Records(b, 0, func(r record.Record) error { out = append(out, r); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, from := range codecs {
		src := recordtest.Build(recordtest.Options{Codec: from, Transactional: true,
			Producer: &recordtest.Producer{ID: 7, Epoch: 3, BaseSequence: 11}}, recs...)
		want := read(t, src)
		sh, _ := record.ParseHeader(src)
		for _, to := range codecs {
			t.Run(from.String()+"_to_"+to.String(), func(t *testing.T) {
				out, err := record.Recompress(src, to, 0)
				if err != nil {
					t.Fatal(err)
				}
				h, err := record.Validate(out, record.ValidateOptions{})
				if err != nil {
					t.Fatalf("the recompressed batch does not validate: %v", err)
				}
				if h.Codec() != to {
					t.Errorf("codec %s, want %s", h.Codec(), to)
				}
				if h.ProducerID != sh.ProducerID || h.ProducerEpoch != sh.ProducerEpoch || h.BaseSequence != sh.BaseSequence ||
					!h.Transactional() || h.NumRecords != sh.NumRecords || h.MaxTimestamp != sh.MaxTimestamp || h.LastOffsetDelta != sh.LastOffsetDelta {
					t.Errorf("header %+v, want the fields of %+v", h, sh)
				}
				if diff := cmp.Diff(want, read(t, out)); diff != "" {
					t.Errorf("records differ (-want +got):\n%s", diff)
				}
			})
		}
	}
	// A control batch stays as it is.
	marker := record.MarkerBatch(7, 3, true, 1, 1_700_000_000_000)
	if out, err := record.Recompress(marker, record.CodecZstd, 0); err != nil || &out[0] != &marker[0] {
		t.Errorf("a control batch was re-encoded (err %v)", err)
	}
	// Corrupt input is refused, not re-encoded.
	bad := recordtest.Batch(record.CodecGzip, recs...)
	bad[len(bad)-3] ^= 0xff
	if _, err := record.Recompress(bad, record.CodecNone, 0); err == nil {
		t.Error("a corrupt gzip batch was recompressed")
	}
}
