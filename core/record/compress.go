package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compress compresses a batch's records section with c, in the form Kafka
// clients read: a gzip stream, xerial-framed snappy (as the Java client
// writes it), an LZ4 frame, or a zstd frame. CodecNone returns a copy.
// The broker uses it through Recompress (topic compression.type).
func Compress(c Codec, src []byte) ([]byte, error) {
	switch c {
	case CodecNone:
		return append([]byte(nil), src...), nil
	case CodecGzip:
		return gzipBytes(src)
	case CodecSnappy:
		return xerialBytes(src), nil
	case CodecLZ4:
		return lz4Bytes(src)
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("record: zstd encoder: %w", err)
		}
		return enc.EncodeAll(src, nil), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupportedCodec, c)
}

func gzipBytes(src []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(src); err != nil {
		return nil, fmt.Errorf("record: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("record: gzip: %w", err)
	}
	return buf.Bytes(), nil
}

func lz4Bytes(src []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := lz4.NewWriter(&buf)
	if _, err := zw.Write(src); err != nil {
		return nil, fmt.Errorf("record: lz4: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("record: lz4: %w", err)
	}
	return buf.Bytes(), nil
}

// xerialBytes frames src as snappy-java does: the xerial header, then
// blocks of at most xerialBlockSize input bytes, each a 4-byte big-endian
// length and a raw snappy block.
func xerialBytes(src []byte) []byte {
	dst := make([]byte, 0, xerialHeaderSize+snappy.MaxEncodedLen(len(src))+4*(len(src)/xerialBlockSize+1))
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, xerialVersion)
	dst = binary.BigEndian.AppendUint32(dst, xerialCompat)
	var block []byte
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		block = snappy.Encode(block[:cap(block)], src[:n])
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		dst = append(dst, block...)
		src = src[n:]
	}
	return dst
}

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// Recompress returns batch (one whole, validated RecordBatch v2) with its
// records section re-encoded with c, as Kafka's broker does for a topic
// whose compression.type names a codec: the header is kept (offsets,
// timestamps, producer fields, transactional and timestamp-type bits),
// the codec bits, batch length and CRC are rewritten. A batch already in
// c is returned as is. limit bounds the decompressed size (limit <= 0
// means DefaultDecompressLimit). Control batches are never compressed and are returned as
// is.
func Recompress(batch []byte, c Codec, limit int) ([]byte, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return nil, err
	}
	if h.Codec() == c || h.Control() {
		return batch, nil
	}
	if len(batch) < h.Size() {
		return nil, fmt.Errorf("%w: batch of %d bytes, header says %d", ErrShort, len(batch), h.Size())
	}
	if limit <= 0 {
		limit = DefaultDecompressLimit
	}
	raw, err := Decompress(h.Codec(), batch[HeaderSize:h.Size()], limit)
	if err != nil {
		return nil, err
	}
	body, err := Compress(c, raw)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderSize+len(body))
	copy(out, batch[:HeaderSize])
	copy(out[HeaderSize:], body)
	be := binary.BigEndian
	be.PutUint32(out[offBatchLength:], uint32(len(out)-lengthPrefix))
	attrs := be.Uint16(out[offAttributes:])&^attrCodecMask | uint16(c)
	be.PutUint16(out[offAttributes:], attrs)
	SetCRC(out)
	return out, nil
}
