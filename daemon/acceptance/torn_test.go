package acceptance

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// batchHeaderSize is the size of a RecordBatch v2 header, up to and
// including the record count.
const batchHeaderSize = 61

// TestTornTail damages the tail of the last segment after kill -9, the
// way a crash or a bad disk would, and checks that the restarted daemon
// serves the intact prefix (never a corrupt record) and appends right
// after it.
func TestTornTail(t *testing.T) {
	cases := []struct {
		name string
		// damage changes the segment at path whose last batch is
		// [start, start+size); it returns the number of records that
		// must survive, given base, the last batch's base offset, and n,
		// the records produced.
		damage func(t *testing.T, path string, start, size, base, n int64) int64
	}{
		{"truncate-last-batch", func(t *testing.T, path string, start, size, base, n int64) int64 {
			if err := os.Truncate(path, start+size/2); err != nil {
				t.Fatal(err)
			}
			return base
		}},
		{"append-garbage", func(t *testing.T, path string, start, size, base, n int64) int64 {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			garbage := make([]byte, 37)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range garbage {
				garbage[i] = byte(r.Uint32())
			}
			if _, err := f.Write(garbage); err != nil {
				t.Fatal(err)
			}
			return n
		}},
		{"flip-byte-in-last-batch", func(t *testing.T, path string, start, size, base, n int64) int64 {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			at := start + batchHeaderSize + (size-batchHeaderSize)/2
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, at); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0x5a
			if _, err := f.WriteAt(b, at); err != nil {
				t.Fatal(err)
			}
			return base
		}},
	}
	n := int64(2000)
	if testing.Short() {
		n = 400
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const topic = "torn"
			d := startDaemon(t, nil)
			createTopic(t, newAdmin(t, d.Addr()), topic, 1, nil)
			cl := newClient(t, d.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(50*time.Millisecond))
			for i := int64(0); i < n; i += 100 {
				var recs []*kgo.Record
				for j := i; j < min(i+100, n); j++ {
					recs = append(recs, &kgo.Record{Value: tornValue("old", j)})
				}
				produceSync(t, cl, recs...)
			}
			cl.Close()
			d.Kill9()

			path := lastSegment(t, filepath.Join(d.DataDir(), topic+"-0"))
			start, size, base := lastBatch(t, path)
			survive := c.damage(t, path, start, size, base, n)
			t.Logf("%s: last batch at byte %d, %d bytes, base offset %d; expecting %d of %d records", filepath.Base(path), start, size, base, survive, n)

			d.Restart(t)
			addr := d.Addr()
			adm := newAdmin(t, addr)
			if end := offsets(t, adm, topic, true)[0]; end != survive {
				t.Fatalf("end offset after restart: %d, want %d", end, survive)
			}
			const m = 50
			cl = newClient(t, addr, kgo.DefaultProduceTopic(topic))
			for j := range int64(m) {
				r := &kgo.Record{Value: tornValue("new", j)}
				produceSync(t, cl, r)
				if r.Offset != survive+j {
					t.Fatalf("new record %d appended at offset %d, want %d", j, r.Offset, survive+j)
				}
			}
			recs := consume(t, addr, topic, nil, map[int32]int64{0: survive + m})[0]
			if int64(len(recs)) != survive+m {
				t.Fatalf("consumed %d records, want %d", len(recs), survive+m)
			}
			for i, r := range recs {
				want := tornValue("old", int64(i))
				if int64(i) >= survive {
					want = tornValue("new", int64(i)-survive)
				}
				if r.Offset != int64(i) || string(r.Value) != string(want) {
					t.Fatalf("record %d: offset %d value %.20q..., want offset %d value %.20q...", i, r.Offset, r.Value, i, want)
				}
			}
		})
	}
}

// tornValue is record i of a generation: a readable prefix and ~200
// bytes of letters.
func tornValue(gen string, i int64) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	v := fmt.Appendf(nil, "%s-%06d-", gen, i)
	for range 150 + r.IntN(100) {
		v = append(v, 'a'+byte(r.IntN(26)))
	}
	return v
}

// lastSegment returns the .log file with the highest base offset in dir.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		ents, _ := os.ReadDir(dir)
		t.Fatalf("no segment in %s (%v): %v", dir, err, ents)
	}
	slices.Sort(logs) // %020d names sort by base offset
	return logs[len(logs)-1]
}

// lastBatch walks the record batches of the segment at path and returns
// the last one's byte position, size and base offset.
func lastBatch(t *testing.T, path string) (start, size, base int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start = -1
	for pos := int64(0); pos+batchHeaderSize <= int64(len(b)); {
		n := 12 + int64(binary.BigEndian.Uint32(b[pos+8:]))
		if n < batchHeaderSize || pos+n > int64(len(b)) {
			t.Fatalf("%s: batch at %d claims %d bytes of %d", path, pos, n, len(b))
		}
		start, size, base = pos, n, int64(binary.BigEndian.Uint64(b[pos:]))
		pos += n
	}
	if start < 0 {
		t.Fatalf("%s: no batch in %d bytes", path, len(b))
	}
	if size <= batchHeaderSize {
		t.Fatalf("%s: last batch of %d bytes has no records", path, size)
	}
	return start, size, base
}
