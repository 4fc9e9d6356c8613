package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/vltava/vltava/core/record"
)

var codecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}
var compressed = codecs[1:]

// payload is n bytes of compressible but not trivial data.
func payload(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefgh"[r.IntN(8)]
	}
	return b
}

func TestCompressRoundTrip(t *testing.T) {
	for _, c := range codecs {
		for _, n := range []int{0, 1, 1000, 100 << 10} {
			t.Run(fmt.Sprintf("%s/%d", c, n), func(t *testing.T) {
				src := payload(n)
				z, err := record.Compress(c, src)
				if err != nil {
					t.Fatal(err)
				}
				got, err := record.Decompress(c, z, n)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, src) {
					t.Fatalf("round trip changed %d bytes into %d", n, len(got))
				}
				if n > 0 {
					if _, err := record.Decompress(c, z, n-1); !errors.Is(err, record.ErrDecompressLimit) {
						t.Fatalf("limit %d of %d: err %v", n-1, n, err)
					}
				}
			})
		}
	}
}

func TestSnappyFraming(t *testing.T) {
	src := payload(100 << 10)
	t.Run("raw", func(t *testing.T) {
		got, err := record.Decompress(record.CodecSnappy, snappy.Encode(nil, src), len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("err %v, equal %v", err, bytes.Equal(got, src))
		}
	})
	t.Run("xerial", func(t *testing.T) {
		z, _ := record.Compress(record.CodecSnappy, src)
		if !bytes.HasPrefix(z, []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")) {
			t.Fatalf("no xerial header: % x", z[:16])
		}
		// Hand-framed as snappy-java writes it, with uneven blocks.
		framed := []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
		for rest := src; len(rest) > 0; {
			n := min(len(rest), 20000)
			blk := snappy.Encode(nil, rest[:n])
			framed = binary.BigEndian.AppendUint32(framed, uint32(len(blk)))
			framed = append(framed, blk...)
			rest = rest[n:]
		}
		got, err := record.Decompress(record.CodecSnappy, framed, len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("err %v, equal %v", err, bytes.Equal(got, src))
		}
		if _, err := record.Decompress(record.CodecSnappy, framed, len(src)-1); !errors.Is(err, record.ErrDecompressLimit) {
			t.Fatalf("limit: %v", err)
		}
		bad := append(append([]byte(nil), framed...), 0, 0, 1) // partial length
		if _, err := record.Decompress(record.CodecSnappy, bad, len(src)); !errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("trailing partial length: %v", err)
		}
		bad = append(append([]byte(nil), framed[:16]...), 0xff, 0, 0, 0, 1)
		if _, err := record.Decompress(record.CodecSnappy, bad, len(src)); !errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("oversized block length: %v", err)
		}
	})
}

func TestDecompressCorrupt(t *testing.T) {
	src := payload(50 << 10)
	for _, c := range compressed {
		z, err := record.Compress(c, src)
		if err != nil {
			t.Fatal(err)
		}
		flipped := append([]byte(nil), z...)
		flipped[len(flipped)/2] ^= 0xff
		cases := map[string][]byte{
			"truncated": z[:len(z)/2],
			"garbage":   bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64),
			"flipped":   flipped,
		}
		for name, in := range cases {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				got, err := record.Decompress(c, in, 1<<20)
				if !errors.Is(err, record.ErrCorrupt) {
					t.Fatalf("err %v (got %d bytes, equal %v)", err, len(got), bytes.Equal(got, src))
				}
			})
		}
	}
}

// TestDecompressBomb feeds each codec 16 MiB of zeros, compressed to a
// few KiB, with a 1 MiB limit.
func TestDecompressBomb(t *testing.T) {
	zeros := make([]byte, 16<<20)
	for _, c := range compressed {
		t.Run(c.String(), func(t *testing.T) {
			z, err := record.Compress(c, zeros)
			if err != nil {
				t.Fatal(err)
			}
			_, err = record.Decompress(c, z, 1<<20)
			if !errors.Is(err, record.ErrDecompressLimit) || errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("compressed %d bytes: err %v", len(z), err)
			}
		})
	}
}

func TestDecompressUnsupported(t *testing.T) {
	for _, c := range []record.Codec{5, 6, 7} {
		_, err := record.Decompress(c, []byte("x"), 10)
		if !errors.Is(err, record.ErrUnsupportedCodec) || errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("codec %d: %v", c, err)
		}
		if _, err := record.Compress(c, []byte("x")); !errors.Is(err, record.ErrUnsupportedCodec) {
			t.Fatalf("compress codec %d: %v", c, err)
		}
	}
}

// TestDecompressBombMemory checks that refusing a bomb costs memory in
// proportion to the limit, not to the bomb: 32 MiB of zeros, 1 MiB limit.
func TestDecompressBombMemory(t *testing.T) {
	zeros := make([]byte, 32<<20)
	for _, c := range compressed {
		z, err := record.Compress(c, zeros)
		if err != nil {
			t.Fatal(err)
		}
		record.Decompress(c, z, 1<<20) // warm pools
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = record.Decompress(c, z, 1<<20)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, record.ErrDecompressLimit) {
			t.Fatalf("%s: %v", c, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
			t.Errorf("%s: refusing the bomb allocated %d bytes", c, got)
		}
	}
}
