package record

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultDecompressLimit is the decompressed-size bound Validate uses when
// ValidateOptions.DecompressLimit and MaxBatchBytes are both unset.
const DefaultDecompressLimit = 64 << 20

// ValidateOptions configure Validate. The zero value checks framing, CRC
// and records with no size or timestamp limits beyond
// DefaultDecompressLimit.
type ValidateOptions struct {
	// MaxBatchBytes is the topic's max.message.bytes: a batch larger
	// than this (header included) fails with MESSAGE_TOO_LARGE. Zero or
	// less means no limit.
	MaxBatchBytes int

	// DecompressLimit bounds the decompressed size of a compressed
	// records section; beyond it Validate fails with MESSAGE_TOO_LARGE.
	// Zero or less means max(4*MaxBatchBytes, DefaultDecompressLimit):
	// real producers' data compresses a few times over, and 64 MiB
	// leaves room for very repetitive payloads while capping what a
	// decompression bomb can make the broker allocate per request.
	// Kafka itself streams records and has no such bound; a batch that
	// inflates beyond it is refused here even if it is well formed.
	DecompressLimit int

	// Internal relaxes the rules Kafka applies only to batches from
	// producer clients, for batches from replication or the log itself:
	// control batches are allowed, the base offset may be anything, and
	// offset deltas need only increase up to lastOffsetDelta (compaction
	// leaves gaps and may leave no records at all).
	Internal bool

	// RequireKeys rejects records with a null key with INVALID_RECORD, as
	// Kafka does for topics with cleanup.policy=compact.
	RequireKeys bool

	// NowMs enables the message.timestamp.before.max.ms and
	// message.timestamp.after.max.ms checks (KIP-937) when non-zero: a
	// CreateTime record timestamp earlier than NowMs-TimestampBeforeMaxMs
	// or later than NowMs+TimestampAfterMaxMs fails with
	// INVALID_TIMESTAMP. A negative bound, or math.MaxInt64 (Kafka's
	// default), disables that side; 0 allows no difference at all, as in
	// Kafka. Leave NowMs zero for topics with message.timestamp.type
	// LogAppendTime, whose timestamps the broker overwrites.
	NowMs                int64
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
}

func (o *ValidateOptions) decompressLimit() int {
	if o.DecompressLimit > 0 {
		return o.DecompressLimit
	}
	return max(4*o.MaxBatchBytes, DefaultDecompressLimit)
}

// Error is a batch Validate refused: the Kafka error a broker answers
// with, and why. errors.Is matches both Code (a *kerr.Error such as
// kerr.CorruptMessage) and the reason, which wraps ErrCorrupt when the
// bytes themselves are corrupt.
type Error struct {
	Code *kerr.Error
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() + " [" + e.Code.Message + "]" }

// Unwrap returns the Kafka error and the reason.
func (e *Error) Unwrap() []error { return []error{e.Code, e.Err} }

// corrupt builds an Error for corrupt bytes: it wraps ErrCorrupt.
func corrupt(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Err: fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)}
}

// refused builds an Error for well-formed bytes that break a rule.
func refused(code *kerr.Error, format string, args ...any) *Error {
	return &Error{Code: code, Err: fmt.Errorf("record: "+format, args...)}
}

// Validate checks one RecordBatch v2 the way a Kafka broker checks a
// produced batch before appending it, and returns its header. batch must
// hold exactly one batch. See the package documentation for what a nil
// error guarantees. Every error is an *Error.
func Validate(batch []byte, opts ValidateOptions) (Header, error) {
	h, err := validateHeader(batch, &opts)
	if err != nil {
		return Header{}, err
	}
	records := batch[HeaderSize:]
	if c := h.Codec(); c != CodecNone {
		bp := getBuf()
		defer putBuf(bp)
		*bp, err = decompressAppend(*bp, c, records, opts.decompressLimit())
		if err != nil {
			return Header{}, decompressErr(err)
		}
		records = *bp
	}
	if err := validateRecords(h, records, &opts); err != nil {
		return Header{}, err
	}
	return h, nil
}

// validateHeader runs the batch-level checks, in the order Kafka's
// produce path does: framing, size, client rules, CRC, codec, counts.
func validateHeader(batch []byte, opts *ValidateOptions) (Header, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		if errors.Is(err, ErrShort) {
			return Header{}, &Error{Code: kerr.CorruptMessage, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
		}
		return Header{}, &Error{Code: kerr.CorruptMessage, Err: err}
	}
	if h.Size() != len(batch) {
		return Header{}, corrupt(kerr.CorruptMessage, "batch length says %d bytes, have %d", h.Size(), len(batch))
	}
	if opts.MaxBatchBytes > 0 && len(batch) > opts.MaxBatchBytes {
		return Header{}, refused(kerr.MessageTooLarge, "batch of %d bytes exceeds max.message.bytes %d", len(batch), opts.MaxBatchBytes)
	}
	if !opts.Internal && h.BaseOffset != 0 {
		return Header{}, refused(kerr.InvalidRecord, "produced batch has base offset %d, want 0", h.BaseOffset)
	}
	if err := CheckCRC(batch); err != nil {
		return Header{}, &Error{Code: kerr.CorruptMessage, Err: err}
	}
	if c := h.Codec(); c > CodecZstd {
		return Header{}, refused(kerr.UnsupportedCompressionType, "unsupported compression codec %d", int8(c))
	}
	if opts.Internal {
		if h.NumRecords > h.LastOffsetDelta+1 {
			return Header{}, refused(kerr.InvalidRecord, "%d records but last offset delta %d", h.NumRecords, h.LastOffsetDelta)
		}
		return h, nil
	}
	if h.NumRecords <= 0 {
		return Header{}, refused(kerr.InvalidRecord, "record count %d, want at least 1", h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return Header{}, refused(kerr.InvalidRecord, "%d records but last offset delta %d", h.NumRecords, h.LastOffsetDelta)
	}
	if h.Control() {
		return Header{}, refused(kerr.InvalidRecord, "clients may not write control batches")
	}
	if h.Idempotent() && h.BaseSequence < 0 {
		return Header{}, refused(kerr.InvalidRecord, "producer ID %d with base sequence %d", h.ProducerID, h.BaseSequence)
	}
	return h, nil
}

func decompressErr(err error) error {
	switch {
	case errors.Is(err, ErrDecompressLimit):
		return &Error{Code: kerr.MessageTooLarge, Err: err}
	case errors.Is(err, ErrUnsupportedCodec):
		return &Error{Code: kerr.UnsupportedCompressionType, Err: err}
	}
	return &Error{Code: kerr.CorruptMessage, Err: err}
}

// validateRecords walks the decompressed records section, checking each
// record's framing and deltas and that exactly NumRecords records fill it.
// It allocates nothing unless it fails.
func validateRecords(h Header, records []byte, opts *ValidateOptions) error {
	minTS, maxTS, checkTS := timestampBounds(opts)
	prevDelta := int32(-1)
	pos := 0
	for i := range int(h.NumRecords) {
		if pos == len(records) {
			return corrupt(kerr.InvalidRecord, "header says %d records, found %d", h.NumRecords, i)
		}
		r, err := parseRecord(records[pos:])
		if err != nil {
			return &Error{Code: kerr.InvalidRecord, Err: fmt.Errorf("%w: %w", ErrCorrupt, recordErr(i, pos, err))}
		}
		if !opts.Internal && r.offsetDelta != int32(i) {
			return corrupt(kerr.InvalidRecord, "record %d has offset delta %d, want %d", i, r.offsetDelta, i)
		}
		if opts.Internal && (r.offsetDelta <= prevDelta || r.offsetDelta > h.LastOffsetDelta) {
			return corrupt(kerr.InvalidRecord, "record %d has offset delta %d after %d (last %d)", i, r.offsetDelta, prevDelta, h.LastOffsetDelta)
		}
		prevDelta = r.offsetDelta
		if opts.RequireKeys && r.key == nil {
			return refused(kerr.InvalidRecord, "record %d has a null key; compacted topics need keys", i)
		}
		if checkTS {
			if ts := h.BaseTimestamp + r.timestampDelta; ts < minTS || ts > maxTS {
				return refused(kerr.InvalidTimestamp, "record %d timestamp %d outside [%d, %d]", i, ts, minTS, maxTS)
			}
		}
		pos += r.size
	}
	if pos != len(records) {
		return corrupt(kerr.InvalidRecord, "%d bytes follow the %d records the header declares", len(records)-pos, h.NumRecords)
	}
	return nil
}

// timestampBounds returns the accepted record timestamp range, and
// whether any check is enabled.
func timestampBounds(o *ValidateOptions) (lo, hi int64, on bool) {
	lo, hi = math.MinInt64, math.MaxInt64
	if o.NowMs == 0 {
		return lo, hi, false
	}
	// Saturating: a bound past the int64 range is no bound.
	if b := o.TimestampBeforeMaxMs; b >= 0 && b != math.MaxInt64 && o.NowMs >= math.MinInt64+b {
		lo = o.NowMs - b
		on = true
	}
	if a := o.TimestampAfterMaxMs; a >= 0 && a != math.MaxInt64 && o.NowMs <= math.MaxInt64-a {
		hi = o.NowMs + a
		on = true
	}
	return lo, hi, on
}

// maxPooledBuf is the largest decompression buffer returned to the pool;
// rarer, larger ones are left to the GC so the pool does not pin memory.
const maxPooledBuf = 4 << 20

var bufPool = sync.Pool{New: func() any { return new([]byte) }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		*bp = nil
	}
	*bp = (*bp)[:0]
	bufPool.Put(bp)
}
