package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrUnsupportedCodec is returned for a codec number Kafka does not define
// (attribute bits 5..7). It is not corruption: Kafka answers it with
// UNSUPPORTED_COMPRESSION_TYPE.
var ErrUnsupportedCodec = errors.New("record: unsupported compression codec")

// ErrDecompressLimit is returned when decompressed data would exceed the
// caller's limit. The input may be a valid (but hostile or oversized)
// stream, so it does not wrap ErrCorrupt.
var ErrDecompressLimit = errors.New("record: decompressed size exceeds limit")

// xerialMagic opens a snappy stream framed the way snappy-java's
// SnappyOutputStream (used by the Java client and librdkafka) writes it.
// It is followed by a 4-byte version and a 4-byte compatible version, then
// blocks of a 4-byte big-endian length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16       // magic + version + compat
	xerialBlockSize  = 32 << 10 // snappy-java's default block size
	xerialVersion    = 1
	xerialCompat     = 1

	// zstdMaxWindow bounds the history a zstd frame may ask the decoder
	// to keep. Kafka producers use zstd levels whose windows are at most
	// a few MiB; 64 MiB leaves room for ultra levels while refusing
	// frames that would make the decoder allocate hundreds of MiB.
	zstdMaxWindow = 64 << 20
)

// Decompress returns the decompressed form of src, a batch's records
// section compressed with c. It fails with ErrDecompressLimit rather than
// produce more than limit bytes, with ErrCorrupt for malformed input and
// with ErrUnsupportedCodec for an unknown codec. CodecNone returns a copy.
func Decompress(c Codec, src []byte, limit int) ([]byte, error) {
	return decompressAppend(nil, c, src, limit)
}

// decompressAppend decompresses src into dst[:0] (reusing its capacity)
// and returns the result. It never grows the result beyond limit bytes.
func decompressAppend(dst []byte, c Codec, src []byte, limit int) ([]byte, error) {
	dst = dst[:0]
	limit = max(limit, 0)
	if len(src) == 0 && c != CodecNone && c <= CodecZstd {
		// Some stream readers treat no input as an empty stream, but
		// no codec's framing is zero bytes long.
		return dst, fmt.Errorf("%w: empty %s data", ErrCorrupt, c)
	}
	var err error
	switch c {
	case CodecNone:
		if len(src) > limit {
			return dst, limitErr(c, limit)
		}
		return append(dst, src...), nil
	case CodecGzip:
		dst, err = gunzip(dst, src, limit)
	case CodecSnappy:
		dst, err = unsnappy(dst, src, limit)
	case CodecLZ4:
		dst, err = unlz4(dst, src, limit)
	case CodecZstd:
		dst, err = unzstd(dst, src, limit)
	default:
		return dst, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
	}
	if err != nil {
		if errors.Is(err, ErrDecompressLimit) {
			return dst, limitErr(c, limit)
		}
		return dst, fmt.Errorf("%w: %s data: %v", ErrCorrupt, c, err)
	}
	return dst, nil
}

func limitErr(c Codec, limit int) error {
	return fmt.Errorf("%w: %s data inflates beyond %d bytes", ErrDecompressLimit, c, limit)
}

// readLimited appends everything r yields to dst, failing with
// ErrDecompressLimit once more than limit bytes would be appended. Growth
// doubles from a guess based on the compressed size and stops at limit+1,
// so a bomb costs at most about 2*limit bytes before it is refused.
func readLimited(dst []byte, r io.Reader, srcLen, limit int) ([]byte, error) {
	if want := min(4*srcLen+512, limit+1); cap(dst) < want {
		dst = make([]byte, 0, want)
	}
	for {
		if len(dst) == cap(dst) {
			// Double, but never past limit+1: one byte over is enough
			// to know the limit is exceeded.
			nb := make([]byte, len(dst), min(2*cap(dst), limit+1))
			copy(nb, dst)
			dst = nb
		}
		room := min(cap(dst), limit+1)
		n, err := r.Read(dst[len(dst):room])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, ErrDecompressLimit
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// The stream decoders are pooled together with the bytes.Reader they
// read from, so that a warm decode allocates only its output.

type gzipState struct {
	src bytes.Reader
	zr  gzip.Reader
}

var gzipPool = sync.Pool{New: func() any { return new(gzipState) }}

func gunzip(dst, src []byte, limit int) ([]byte, error) {
	st := gzipPool.Get().(*gzipState)
	defer func() {
		st.src.Reset(nil) // drop the reference to src
		gzipPool.Put(st)
	}()
	st.src.Reset(src)
	if err := st.zr.Reset(&st.src); err != nil {
		return dst, err
	}
	return readLimited(dst, &st.zr, len(src), limit)
}

type lz4State struct {
	src bytes.Reader
	zr  *lz4.Reader
}

var lz4Pool = sync.Pool{New: func() any { return &lz4State{zr: lz4.NewReader(nil)} }}

func unlz4(dst, src []byte, limit int) ([]byte, error) {
	st := lz4Pool.Get().(*lz4State)
	defer func() {
		st.src.Reset(nil)
		lz4Pool.Put(st)
	}()
	st.src.Reset(src)
	st.zr.Reset(&st.src)
	return readLimited(dst, st.zr, len(src), limit)
}

// zstdState holds a streaming decoder. With concurrency 1 a zstd.Decoder
// decodes synchronously and starts no goroutines, so a pooled decoder
// dropped by the GC leaks nothing.
type zstdState struct {
	src bytes.Reader
	zr  *zstd.Decoder
}

var zstdPool sync.Pool // *zstdState

func unzstd(dst, src []byte, limit int) ([]byte, error) {
	st, _ := zstdPool.Get().(*zstdState)
	if st == nil {
		zr, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(zstdMaxWindow),
		)
		if err != nil {
			return dst, err
		}
		st = &zstdState{zr: zr}
	}
	defer func() {
		st.src.Reset(nil)
		zstdPool.Put(st)
	}()
	st.src.Reset(src)
	if err := st.zr.Reset(&st.src); err != nil {
		return dst, err
	}
	return readLimited(dst, st.zr, len(src), limit)
}

// unsnappy decodes raw snappy or xerial-framed snappy.
func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return appendSnappyBlock(dst, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return dst, errors.New("xerial header truncated")
	}
	for p := src[xerialHeaderSize:]; len(p) > 0; {
		if len(p) < 4 {
			return dst, errors.New("xerial block length truncated")
		}
		n := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(n) > uint64(len(p)) {
			return dst, fmt.Errorf("xerial block of %d bytes, %d left", n, len(p))
		}
		var err error
		if dst, err = appendSnappyBlock(dst, p[:n], limit); err != nil {
			return dst, err
		}
		p = p[n:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto dst. It checks the
// declared length against limit before allocating. It uses the strict
// decoder: a broker must not accept blocks only the s2 superset can read,
// since Java and librdkafka consumers would fail on them.
func appendSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > limit-len(dst) {
		return dst, ErrDecompressLimit
	}
	start := len(dst)
	dst = growLen(dst, n)
	out, err := snappy.DecodeStrict(dst[start:], block)
	if err != nil {
		return dst[:start], err
	}
	if len(out) != n {
		return dst[:start], errors.New("snappy length mismatch")
	}
	if n > 0 && &out[0] != &dst[start] {
		copy(dst[start:], out)
	}
	return dst, nil
}

// growLen extends b by n bytes, reallocating if needed.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), max(2*cap(b), len(b)+n))
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
