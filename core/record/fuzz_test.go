package record_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// The committed corpora under testdata/fuzz come from
// `go run ./core/record/testdata/gencorpus`; the seeds added here are
// regenerated on every run. Seeds are kept to a few hundred bytes: the
// fuzzer minimizes every new input, which takes long on large ones.

const fuzzLimit = 1 << 20

func seedBatches() [][]byte {
	var out [][]byte
	small := []recordtest.Rec{
		{Key: []byte("a"), Value: []byte("hello hello"), Timestamp: 10, Headers: []recordtest.Header{{Key: "h", Value: []byte("v")}}},
		{Value: []byte("x"), Timestamp: 9},
	}
	for _, c := range codecs {
		b := recordtest.Batch(c, small...)
		out = append(out, b, b[:len(b)-3])
	}
	out = append(out,
		rawBatch(record.CodecNone, 3, 5, kr(0, 3, 5)),
		rawBatch(record.CodecNone, 1, 0, []byte{9, 0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01}),
	)
	return out
}

// FuzzValidate checks that Validate never panics, returns only *Error,
// and agrees with Records. Each input is validated as is and again with
// its length and CRC fixed, so the fuzzer reaches the record decoder.
func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidate(t, b)
		if len(b) >= record.HeaderSize {
			checkValidate(t, recordtest.Reseal(append([]byte(nil), b...)))
		}
	})
}

func checkValidate(t *testing.T, b []byte) {
	for _, internal := range []bool{false, true} {
		h, err := record.Validate(b, record.ValidateOptions{DecompressLimit: fuzzLimit, Internal: internal})
		if err != nil {
			var ve *record.Error
			if !errors.As(err, &ve) || ve.Code == nil {
				t.Fatalf("error %v is not a *record.Error", err)
			}
			continue
		}
		if h.Size() != len(b) {
			t.Fatalf("valid batch of %d bytes, header says %d", len(b), h.Size())
		}
		n := 0
		prev := int64(-1)
		err = record.Records(b, fuzzLimit, func(r record.Record) error {
			if !internal && r.Offset != h.BaseOffset+int64(n) {
				t.Fatalf("record %d offset %d, base %d", n, r.Offset, h.BaseOffset)
			}
			if r.Offset <= prev || r.Offset > h.LastOffset() {
				t.Fatalf("record %d offset %d after %d, last %d", n, r.Offset, prev, h.LastOffset())
			}
			prev = r.Offset
			n++
			return nil
		})
		if err != nil || n != int(h.NumRecords) {
			t.Fatalf("Validate accepted what Records refuses: %v after %d of %d records", err, n, h.NumRecords)
		}
	}
}

// FuzzNext checks that Next never panics and splits consistently.
func FuzzNext(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
		f.Add(append(append([]byte(nil), b...), b...))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		h, batch, rest, err := record.Next(buf)
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, record.ErrShort) {
				t.Fatalf("error %v is neither corrupt nor short", err)
			}
			if len(rest) != len(buf) || batch != nil {
				t.Fatalf("failed Next consumed input")
			}
			return
		}
		if h.Magic != 2 || len(batch) != h.Size() || len(batch) < record.HeaderSize || len(batch)+len(rest) != len(buf) {
			t.Fatalf("split %d+%d of %d, header size %d", len(batch), len(rest), len(buf), h.Size())
		}
		if cap(batch) != len(batch) {
			t.Fatalf("batch capacity %d runs into the rest", cap(batch))
		}
	})
}

// FuzzDecompress checks that no codec panics or exceeds the limit.
func FuzzDecompress(f *testing.F) {
	for _, c := range codecs {
		z, _ := record.Compress(c, payload(200))
		f.Add(byte(c), z)
	}
	f.Fuzz(func(t *testing.T, c byte, z []byte) {
		const limit = 64 << 10
		out, err := record.Decompress(record.Codec(c&7), z, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("%d bytes out, limit %d", len(out), limit)
		}
		if err != nil && !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, record.ErrDecompressLimit) && !errors.Is(err, record.ErrUnsupportedCodec) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}

// FuzzRecompress: a batch Validate accepts re-encodes into every codec as
// a batch Validate accepts, holding the same records.
func FuzzRecompress(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := record.Validate(b, record.ValidateOptions{DecompressLimit: fuzzLimit}); err != nil {
			return
		}
		var want []record.Record
		if err := record.Records(b, fuzzLimit, func(r record.Record) error { want = append(want, r); return nil }); err != nil {
			t.Fatalf("Records of a valid batch: %v", err)
		}
		for _, c := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
			out, err := record.Recompress(b, c, fuzzLimit)
			if err != nil {
				t.Fatalf("recompress a valid batch to %s: %v", c, err)
			}
			if _, err := record.Validate(out, record.ValidateOptions{DecompressLimit: 2 * fuzzLimit}); err != nil {
				t.Fatalf("recompressed to %s, the batch no longer validates: %v", c, err)
			}
			n := 0
			if err := record.Records(out, 2*fuzzLimit, func(r record.Record) error {
				if n >= len(want) || !bytes.Equal(r.Value, want[n].Value) || !bytes.Equal(r.Key, want[n].Key) || r.Offset != want[n].Offset || r.Timestamp != want[n].Timestamp {
					return fmt.Errorf("record %d differs", n)
				}
				n++
				return nil
			}); err != nil || n != len(want) {
				t.Fatalf("recompressed to %s: %v (%d of %d records)", c, err, n, len(want))
			}
		}
	})
}
