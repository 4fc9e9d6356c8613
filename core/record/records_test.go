package record_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

func collect(t *testing.T, batch []byte) []record.Record {
	t.Helper()
	var out []record.Record
	if err := record.Records(batch, 1<<20, func(r record.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecordsRoundTrip(t *testing.T) {
	in := []recordtest.Rec{
		{Key: []byte("a"), Value: []byte("1"), Timestamp: 5000, Headers: []recordtest.Header{{Key: "x", Value: []byte("y")}, {Key: "x", Value: nil}, {Key: "", Value: []byte{}}}},
		{Key: nil, Value: nil, Timestamp: 4000},
		{Key: []byte{}, Value: payload(3000), Timestamp: 7000},
	}
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			b := recordtest.Build(recordtest.Options{Codec: c, BaseOffset: 100}, in...)
			if _, err := record.Validate(b, record.ValidateOptions{Internal: true}); err != nil {
				t.Fatal(err)
			}
			got := collect(t, b)
			if len(got) != len(in) {
				t.Fatalf("%d records, want %d", len(got), len(in))
			}
			for i, r := range got {
				w := in[i]
				if r.Offset != 100+int64(i) || r.Timestamp != w.Timestamp {
					t.Errorf("record %d: offset %d timestamp %d", i, r.Offset, r.Timestamp)
				}
				if !sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) {
					t.Errorf("record %d: key %q value %d bytes", i, r.Key, len(r.Value))
				}
				if len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: %d headers", i, len(r.Headers))
				}
				for j, h := range r.Headers {
					if h.Key != w.Headers[j].Key || !sameBytes(h.Value, w.Headers[j].Value) {
						t.Errorf("record %d header %d: %q=%q", i, j, h.Key, h.Value)
					}
				}
			}
		})
	}
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

func TestRecordsLogAppendTime(t *testing.T) {
	b := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("a"), Timestamp: 1}, recordtest.Rec{Value: []byte("b"), Timestamp: 2})
	record.SetLogAppendTime(b, 99)
	for _, r := range collect(t, b) {
		if r.Timestamp != 99 {
			t.Fatalf("timestamp %d, want broker time 99", r.Timestamp)
		}
	}
}

func TestRecordsCompacted(t *testing.T) {
	b := rawBatch(record.CodecZstd, 3, 9, kr(0, 4, 9))
	record.SetBaseOffset(b, 1000)
	var offs []int64
	for _, r := range collect(t, b) {
		offs = append(offs, r.Offset)
	}
	if len(offs) != 3 || offs[0] != 1000 || offs[1] != 1004 || offs[2] != 1009 {
		t.Fatalf("offsets %v", offs)
	}
}

func TestRecordsErrors(t *testing.T) {
	good := recordtest.Batch(record.CodecGzip, recs(2)...)
	stop := errors.New("stop")
	n := 0
	if err := record.Records(good, 0, func(record.Record) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn error: %v after %d records", err, n)
	}
	bad := map[string][]byte{
		"crc":        edit(good, false, func(b []byte) { b[len(b)-1] ^= 1 }),
		"trailing":   append(append([]byte(nil), good...), 0),
		"count":      rawBatch(record.CodecNone, 3, 2, kr(0, 1)),
		"delta":      rawBatch(record.CodecNone, 2, 1, kr(1, 0)),
		"compressed": edit(good[:len(good)-4], true, func([]byte) {}),
	}
	for name, b := range bad {
		err := record.Records(b, 0, func(record.Record) error { return nil })
		if !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := record.Records(recordtest.Batch(record.CodecZstd, recordtest.Rec{Value: make([]byte, 4096)}), 1000, func(record.Record) error { return nil }); !errors.Is(err, record.ErrDecompressLimit) {
		t.Errorf("limit: %v", err)
	}
}
