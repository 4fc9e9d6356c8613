package record_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

func recs(n int) []recordtest.Rec {
	out := make([]recordtest.Rec, n)
	for i := range out {
		out[i] = recordtest.Rec{
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     payload(100 + i),
			Timestamp: 1_700_000_000_000 + int64(i),
			Headers:   []recordtest.Header{{Key: "n", Value: []byte{byte(i)}}},
		}
	}
	return out
}

// rawBatch wraps an arbitrary records section (compressed with codec
// when it is not CodecNone) in a sealed header declaring num records and
// the given last offset delta.
func rawBatch(codec record.Codec, num, lastDelta int32, records []byte) []byte {
	b := recordtest.Batch(record.CodecNone)[:record.HeaderSize]
	if codec != record.CodecNone {
		z, err := record.Compress(codec, records)
		if err != nil {
			panic(err)
		}
		records = z
	}
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
	binary.BigEndian.PutUint32(b[57:], uint32(num))
	return recordtest.Reseal(append(b, records...))
}

// kr encodes records with the given offset deltas.
func kr(deltas ...int32) []byte {
	var out []byte
	for _, d := range deltas {
		out = recordtest.AppendRecord(out, kmsg.Record{OffsetDelta: d, Key: []byte("k"), Value: []byte("v")})
	}
	return out
}

func edit(b []byte, reseal bool, f func([]byte)) []byte {
	b = append([]byte(nil), b...)
	f(b)
	if reseal {
		b = recordtest.Reseal(b)
	}
	return b
}

func TestValidate(t *testing.T) {
	good := recordtest.Batch(record.CodecNone, recs(3)...)
	bomb := make([]byte, 8<<20)
	type tc struct {
		name    string
		batch   []byte
		opts    record.ValidateOptions
		code    *kerr.Error // nil: valid
		corrupt bool        // wraps ErrCorrupt
	}
	cases := []tc{
		{name: "valid", batch: good},
		{name: "bad crc", batch: edit(good, false, func(b []byte) { b[len(b)-1] ^= 1 }), code: kerr.CorruptMessage, corrupt: true},
		{name: "bad magic", batch: edit(good, true, func(b []byte) { b[16] = 1 }), code: kerr.CorruptMessage, corrupt: true},
		{name: "short header", batch: good[:40], code: kerr.CorruptMessage, corrupt: true},
		{name: "empty", batch: nil, code: kerr.CorruptMessage, corrupt: true},
		{name: "trailing bytes", batch: append(append([]byte(nil), good...), 0), code: kerr.CorruptMessage, corrupt: true},
		{name: "length beyond data", batch: good[:len(good)-1], code: kerr.CorruptMessage, corrupt: true},
		{name: "length below header", batch: edit(good, false, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 10) }), code: kerr.CorruptMessage, corrupt: true},
		{name: "too large", batch: good, opts: record.ValidateOptions{MaxBatchBytes: len(good) - 1}, code: kerr.MessageTooLarge},
		{name: "at size limit", batch: good, opts: record.ValidateOptions{MaxBatchBytes: len(good)}},
		{name: "count above records", batch: rawBatch(0, 3, 2, kr(0, 1)), code: kerr.InvalidRecord, corrupt: true},
		{name: "count below records", batch: rawBatch(0, 1, 0, kr(0, 1)), code: kerr.InvalidRecord, corrupt: true},
		{name: "count zero", batch: rawBatch(0, 0, 0, nil), code: kerr.InvalidRecord},
		{name: "last delta mismatch", batch: rawBatch(0, 2, 2, kr(0, 1)), code: kerr.InvalidRecord},
		{name: "offset delta gap", batch: rawBatch(0, 2, 1, kr(0, 2)), code: kerr.InvalidRecord, corrupt: true},
		{name: "offset delta from 1", batch: rawBatch(0, 2, 1, kr(1, 2)), code: kerr.InvalidRecord, corrupt: true},
		{name: "bad varint", batch: rawBatch(0, 1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), code: kerr.InvalidRecord, corrupt: true},
		{name: "varint too long for int32", batch: rawBatch(0, 1, 0, append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, kr(0)...)), code: kerr.InvalidRecord, corrupt: true},
		{name: "record length overrun", batch: rawBatch(0, 1, 0, kr(0)[:5]), code: kerr.InvalidRecord, corrupt: true},
		{name: "negative record length", batch: rawBatch(0, 1, 0, []byte{0x01}), code: kerr.InvalidRecord, corrupt: true},
		{name: "key length below -1", batch: rawBatch(0, 1, 0, []byte{10, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0}), code: kerr.InvalidRecord, corrupt: true},
		{name: "record trailing bytes", batch: rawBatch(0, 1, 0, []byte{12, 0, 0, 0, 0x01, 0x01, 0, 9, 9, 9, 9, 9, 9}[:13]), code: kerr.InvalidRecord, corrupt: true},
		{name: "null header key", batch: rawBatch(0, 1, 0, []byte{9, 0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01}), code: kerr.InvalidRecord, corrupt: true},
		{name: "negative header count", batch: rawBatch(0, 1, 0, []byte{6, 0, 0, 0, 0x01, 0x01, 0x01}), code: kerr.InvalidRecord, corrupt: true},
		{name: "unsupported codec", batch: edit(good, true, func(b []byte) { b[22] |= 5 }), code: kerr.UnsupportedCompressionType},
		{name: "base offset set", batch: edit(good, false, func(b []byte) { record.SetBaseOffset(b, 5) }), code: kerr.InvalidRecord},
		{name: "base offset internal", batch: edit(good, false, func(b []byte) { record.SetBaseOffset(b, 5) }), opts: record.ValidateOptions{Internal: true}},
		{name: "control from client", batch: recordtest.Build(recordtest.Options{Control: true, Transactional: true, Producer: &recordtest.Producer{ID: 1}}, recs(1)...), code: kerr.InvalidRecord},
		{name: "control internal", batch: recordtest.Build(recordtest.Options{Control: true, Transactional: true, Producer: &recordtest.Producer{ID: 1}}, recs(1)...), opts: record.ValidateOptions{Internal: true}},
		{name: "producer without sequence", batch: recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: 1, BaseSequence: -1}}, recs(1)...), code: kerr.InvalidRecord},
		{name: "idempotent", batch: recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: 1, Epoch: 2, BaseSequence: 7}}, recs(2)...)},
		{name: "null key allowed", batch: recordtest.Batch(0, recordtest.Rec{Value: []byte("v")})},
		{name: "null key compacted", batch: recordtest.Batch(0, recordtest.Rec{Value: []byte("v")}), opts: record.ValidateOptions{RequireKeys: true}, code: kerr.InvalidRecord},
		{name: "timestamp in range", batch: good, opts: record.ValidateOptions{NowMs: 1_700_000_000_001, TimestampBeforeMaxMs: 1, TimestampAfterMaxMs: 1}},
		{name: "timestamp too old", batch: good, opts: record.ValidateOptions{NowMs: 1_700_000_000_010, TimestampBeforeMaxMs: 5}, code: kerr.InvalidTimestamp},
		{name: "timestamp too new", batch: good, opts: record.ValidateOptions{NowMs: 1_699_999_999_990, TimestampAfterMaxMs: 5}, code: kerr.InvalidTimestamp},
		{name: "timestamp bounds Kafka's default", batch: good, opts: record.ValidateOptions{NowMs: 1_700_000_000_001, TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: math.MaxInt64}},
		{name: "timestamp bounds near overflow", batch: good, opts: record.ValidateOptions{NowMs: 1_699_999_999_990, TimestampBeforeMaxMs: math.MaxInt64 - 1, TimestampAfterMaxMs: math.MaxInt64 - 1}},
		{name: "timestamp bounds negative", batch: good, opts: record.ValidateOptions{NowMs: 5, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: -1}},
		{name: "timestamp after zero", batch: good, opts: record.ValidateOptions{NowMs: 1_700_000_000_001, TimestampBeforeMaxMs: -1, TimestampAfterMaxMs: 0}, code: kerr.InvalidTimestamp},
		{name: "compacted internal", batch: rawBatch(0, 3, 5, kr(0, 3, 5)), opts: record.ValidateOptions{Internal: true}},
		{name: "compacted empty internal", batch: rawBatch(0, 0, 5, nil), opts: record.ValidateOptions{Internal: true}},
		{name: "compacted from client", batch: rawBatch(0, 3, 5, kr(0, 3, 5)), code: kerr.InvalidRecord},
		{name: "delta decreasing internal", batch: rawBatch(0, 2, 5, kr(3, 2)), opts: record.ValidateOptions{Internal: true}, code: kerr.InvalidRecord, corrupt: true},
		{name: "delta past last internal", batch: rawBatch(0, 2, 5, kr(3, 6)), opts: record.ValidateOptions{Internal: true}, code: kerr.InvalidRecord, corrupt: true},
		{name: "count above last delta internal", batch: rawBatch(0, 3, 1, kr(0, 1, 2)), opts: record.ValidateOptions{Internal: true}, code: kerr.InvalidRecord},
	}
	for _, c := range compressed {
		z := recordtest.Batch(c, recs(3)...)
		n := len(z) - record.HeaderSize
		cases = append(cases,
			tc{name: c.String() + " valid", batch: z},
			tc{name: c.String() + " truncated", batch: edit(z[:record.HeaderSize+n/2], true, func([]byte) {}), code: kerr.CorruptMessage, corrupt: true},
			tc{name: c.String() + " empty payload", batch: edit(z[:record.HeaderSize], true, func([]byte) {}), code: kerr.CorruptMessage, corrupt: true},
			tc{name: c.String() + " count mismatch", batch: rawBatch(c, 3, 2, kr(0, 1)), code: kerr.InvalidRecord, corrupt: true},
			tc{name: c.String() + " bomb", batch: rawBatch(c, 1, 0, bomb), opts: record.ValidateOptions{DecompressLimit: 1 << 20}, code: kerr.MessageTooLarge},
			tc{name: c.String() + " bomb default limit", batch: rawBatch(c, 1, 0, bomb), opts: record.ValidateOptions{MaxBatchBytes: 1 << 20}, code: kerr.InvalidRecord, corrupt: true},
		)
		garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", 32))
		cases = append(cases, tc{name: c.String() + " random bytes", batch: edit(append(z[:record.HeaderSize:record.HeaderSize], garbage...), true, func([]byte) {}), code: kerr.CorruptMessage, corrupt: true})
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h, err := record.Validate(tt.batch, tt.opts)
			if tt.code == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if h.Size() != len(tt.batch) {
					t.Fatalf("header size %d, batch %d", h.Size(), len(tt.batch))
				}
				return
			}
			if !errors.Is(err, tt.code) {
				t.Fatalf("error %v, want %s", err, tt.code.Message)
			}
			if errors.Is(err, record.ErrCorrupt) != tt.corrupt {
				t.Fatalf("error %v: corrupt %v, want %v", err, errors.Is(err, record.ErrCorrupt), tt.corrupt)
			}
			var ve *record.Error
			if !errors.As(err, &ve) || ve.Code != tt.code {
				t.Fatalf("error %v is not a *record.Error with code %s", err, tt.code.Message)
			}
			if h != (record.Header{}) {
				t.Fatalf("header returned with error: %+v", h)
			}
		})
	}
}
