// Command gencorpus writes the committed fuzz seed corpora of package
// record from batches built by recordtest:
//
//	go run ./core/record/testdata/gencorpus
//
// run from the repository root. It overwrites the files it names.
package main

import (
	"encoding/binary"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

var codecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

func main() {
	dir := filepath.Join("core", "record", "testdata", "fuzz")
	recs := []recordtest.Rec{
		{Key: []byte("k0"), Value: []byte("hello hello hello"), Timestamp: 1000, Headers: []recordtest.Header{{Key: "h", Value: []byte("v")}}},
		{Value: []byte("null key"), Timestamp: 1001},
		{Key: []byte("k2"), Timestamp: 999},
	}
	for _, c := range codecs {
		b := recordtest.Build(recordtest.Options{Codec: c, Producer: &recordtest.Producer{ID: 3, Epoch: 1, BaseSequence: 10}}, recs...)
		write(dir, "FuzzValidate", "valid-"+c.String(), b)
		write(dir, "FuzzValidate", "truncated-"+c.String(), recordtest.Reseal(clone(b[:len(b)-len(b)/4])))
		write(dir, "FuzzNext", "two-"+c.String(), append(clone(b), b...))
		z, err := record.Compress(c, recordtest.EncodeRecords(1000, recs...))
		if err != nil {
			log.Fatal(err)
		}
		writeCodec(dir, c, z)
	}
	// A compacted batch: offset deltas 0, 4, 9.
	var raw []byte
	for _, d := range []int32{0, 4, 9} {
		raw = recordtest.AppendRecord(raw, kmsg.Record{OffsetDelta: d, Key: []byte("k"), Value: []byte("v")})
	}
	b := recordtest.Batch(record.CodecNone)[:record.HeaderSize]
	binary.BigEndian.PutUint32(b[23:], 9)
	binary.BigEndian.PutUint32(b[57:], 3)
	write(dir, "FuzzValidate", "compacted", recordtest.Reseal(append(b, raw...)))
	short := recordtest.Batch(record.CodecNone, recs...)
	write(dir, "FuzzNext", "short", short[:len(short)-1])
	write(dir, "FuzzNext", "header-only", short[:record.HeaderSize])
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func write(dir, target, name string, b []byte) {
	writeFile(filepath.Join(dir, target, name), fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b))
}

func writeCodec(dir string, c record.Codec, z []byte) {
	writeFile(filepath.Join(dir, "FuzzDecompress", "valid-"+c.String()), fmt.Sprintf("go test fuzz v1\nbyte(%q)\n[]byte(%q)\n", byte(c), z))
}

func writeFile(path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		log.Fatal(err)
	}
}
