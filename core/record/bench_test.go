package record_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// benchRecs returns 16 records of 1 KiB JSON-like values: a 16 KiB batch
// before compression, compressible the way application data usually is.
func benchRecs() []recordtest.Rec {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]recordtest.Rec, 16)
	for i := range out {
		v := make([]byte, 0, 1024)
		for len(v) < 1000 {
			v = fmt.Appendf(v, `{"user":%d,"event":"click","ts":%d},`, r.IntN(100000), 1_700_000_000_000+r.Int64N(1e6))
		}
		out[i] = recordtest.Rec{Key: fmt.Appendf(nil, "user-%d", i), Value: v[:1024], Timestamp: 1_700_000_000_000 + int64(i)}
	}
	return out
}

// BenchmarkValidate reports throughput in uncompressed record bytes per
// second, and the batch's size on the wire.
func BenchmarkValidate(b *testing.B) {
	recs := benchRecs()
	raw := len(recordtest.EncodeRecords(0, recs...))
	for _, c := range codecs {
		batch := recordtest.Batch(c, recs...)
		opts := record.ValidateOptions{MaxBatchBytes: 1 << 20}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			b.ReportMetric(float64(len(batch)), "wire-bytes")
			for b.Loop() {
				if _, err := record.Validate(batch, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecords is the iterator's cost, for comparison.
func BenchmarkRecords(b *testing.B) {
	recs := benchRecs()
	raw := len(recordtest.EncodeRecords(0, recs...))
	batch := recordtest.Batch(record.CodecNone, recs...)
	b.SetBytes(int64(raw))
	b.ReportAllocs()
	for b.Loop() {
		if err := record.Records(batch, 0, func(record.Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
