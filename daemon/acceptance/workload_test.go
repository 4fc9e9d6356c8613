package acceptance

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// codecs are the compression codecs of the round-trip workload; partition
// p of a workload's topic is written with codecs[p].
var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// workload describes what one client writes to its topic, so that any
// reader can regenerate and check it: perPart records in each of
// len(codecs) partitions, record i of partition p fully determined by
// (topic, p, i).
type workload struct {
	topic   string
	perPart int
	// ts0 is record 0's timestamp; record i has ts0+i. Zero means the
	// producer stamps records itself (kcat), and they must fall in
	// [lo, hi].
	ts0    int64
	lo, hi int64
	// nullKeys gives every 1000th record a null key.
	nullKeys bool
	// kcatHeaders: kcat writes one static header, codec=<codec>, to
	// every record; other writers add i=<i> before it.
	kcatHeaders bool
	written     bool
}

// hdr is a record header as any client reports it.
type hdr struct{ key, value string }

// got is one consumed record as any client reports it.
type got struct {
	partition int32
	offset    int64
	key       []byte
	nullKey   bool
	value     []byte
	headers   []hdr
	ts        int64
}

func (w *workload) seed() uint64 {
	h := fnv.New64a()
	h.Write([]byte(w.topic))
	return h.Sum64()
}

func (w *workload) isNullKey(p int32, i int) bool { return w.nullKeys && i%1000 == 999 }

func (w *workload) key(p int32, i int) []byte {
	if w.isNullKey(p, i) {
		return nil
	}
	return fmt.Appendf(nil, "k-%d-%d", p, i)
}

// value is mostly 8-257 bytes; one record in a hundred is up to 100 KiB.
// The bytes are 16 letters, random, so every codec has some work and kcat
// can carry them as text lines.
func (w *workload) value(p int32, i int) []byte {
	r := rand.New(rand.NewPCG(w.seed(), uint64(p)<<32|uint64(i)))
	n := 8 + r.IntN(250)
	if i%100 == 37 {
		n = 1 + r.IntN(100<<10)
	}
	v := make([]byte, n)
	for j := 0; j < n; j += 16 {
		x := r.Uint64()
		for k := 0; k < 16 && j+k < n; k++ {
			v[j+k] = 'a' + byte(x&15)
			x >>= 4
		}
	}
	return v
}

func (w *workload) headers(p int32, i int) []hdr {
	if w.kcatHeaders {
		return []hdr{{"codec", codecs[p]}}
	}
	return []hdr{{"i", strconv.Itoa(i)}, {"codec", codecs[p]}}
}

func (w *workload) timestamp(i int) int64 { return w.ts0 + int64(i) }

// check compares what reader consumed from w's topic with what was
// written: every partition holds exactly perPart records at offsets
// 0..perPart-1, in order, with the written keys, values, headers (unless
// the reader can not report them) and timestamps.
func (w *workload) check(t *testing.T, reader string, recs map[int32][]got, withHeaders bool) {
	t.Helper()
	bad := 0
	fail := func(format string, args ...any) {
		bad++
		if bad <= 8 {
			t.Errorf("%s reading %s: "+format, append([]any{reader, w.topic}, args...)...)
		}
	}
	for p := range int32(len(codecs)) {
		rs := recs[p]
		if len(rs) != w.perPart {
			fail("partition %d (%s): %d records, want %d", p, codecs[p], len(rs), w.perPart)
		}
		for i, r := range rs[:min(len(rs), w.perPart)] {
			if r.partition != p || r.offset != int64(i) {
				fail("partition %d record %d: at partition %d offset %d", p, i, r.partition, r.offset)
				continue
			}
			if r.nullKey != w.isNullKey(p, i) || !bytes.Equal(r.key, w.key(p, i)) {
				fail("p%d offset %d: key %q (null %v), want %q", p, i, r.key, r.nullKey, w.key(p, i))
			}
			if want := w.value(p, i); !bytes.Equal(r.value, want) {
				fail("p%d offset %d: value of %d bytes differs from the %d written", p, i, len(r.value), len(want))
			}
			if want := w.headers(p, i); withHeaders && !slices.Equal(r.headers, want) {
				fail("p%d offset %d: headers %v, want %v", p, i, r.headers, want)
			}
			if w.ts0 != 0 && r.ts != w.timestamp(i) {
				fail("p%d offset %d: timestamp %d, want %d", p, i, r.ts, w.timestamp(i))
			}
			if w.ts0 == 0 && (r.ts < w.lo || r.ts > w.hi) {
				fail("p%d offset %d: timestamp %d outside the produce window [%d, %d]", p, i, r.ts, w.lo, w.hi)
			}
		}
	}
	if bad > 8 {
		t.Errorf("%s reading %s: %d mismatches in all", reader, w.topic, bad)
	}
}
