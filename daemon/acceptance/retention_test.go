package acceptance

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// segment is one segment of a partition directory.
type segment struct {
	base              int64
	logSize           int64
	index, timeindex  bool
	firstBatchOffset  int64
	firstBatchPresent bool
}

var segmentName = regexp.MustCompile(`^(\d+)\.(log|index|timeindex)$`)

// segments lists the segments of the partition directory dir by base
// offset, failing on a segment file whose name is not a %020d offset.
func segments(t *testing.T, dir string) []segment {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	byBase := map[int64]*segment{}
	var bases []int64
	for _, e := range ents {
		m := segmentName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if len(m[1]) != 20 {
			t.Fatalf("%s: segment file name is not a 20-digit base offset", e.Name())
		}
		base, _ := strconv.ParseInt(m[1], 10, 64)
		s := byBase[base]
		if s == nil {
			s = &segment{base: base}
			byBase[base] = s
			bases = append(bases, base)
		}
		switch m[2] {
		case "log":
			s.logSize, s.firstBatchOffset, s.firstBatchPresent = firstBatch(t, filepath.Join(dir, e.Name()))
		case "index":
			s.index = true
		case "timeindex":
			s.timeindex = true
		}
	}
	var out []segment
	slices.Sort(bases)
	for _, b := range bases {
		out = append(out, *byBase[b])
	}
	return out
}

// firstBatch returns the size of the .log file at path and the base
// offset of its first batch. A file deleted meanwhile reads as empty.
func firstBatch(t *testing.T, path string) (size, base int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return st.Size(), 0, false
	}
	return st.Size(), int64(binary.BigEndian.Uint64(b[:])), true
}

// TestRetentionAndRolling rolls segments at a small log.segment.bytes,
// lets retention.bytes delete the oldest ones, and checks the files on
// disk, the log start offset and ListOffsets by timestamp against Kafka's
// rules.
func TestRetentionAndRolling(t *testing.T) {
	const (
		topic          = "retained"
		segmentBytes   = 64 << 10
		retentionBytes = 256 << 10
		tsStep         = 10
	)
	n := int64(1200)
	if testing.Short() {
		n = 600
	}
	d := startDaemon(t, map[string]string{
		"log.segment.bytes":               strconv.Itoa(segmentBytes),
		"log.retention.check.interval.ms": "1000",
	})
	addr := d.Addr()
	adm := newAdmin(t, addr)
	createTopic(t, adm, topic, 1, map[string]string{"retention.bytes": strconv.Itoa(retentionBytes)})

	ts0 := time.Now().Add(-time.Hour).UnixMilli()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(20*time.Millisecond))
	for i := int64(0); i < n; i += 8 { // ~8 KiB batches, ~8 per segment
		var recs []*kgo.Record
		for j := i; j < min(i+8, n); j++ {
			recs = append(recs, &kgo.Record{Value: retainedValue(j), Timestamp: time.UnixMilli(ts0 + tsStep*j)})
		}
		produceSync(t, cl, recs...)
	}

	dir := filepath.Join(d.DataDir(), topic+"-0")
	var segs []segment
	var start, total int64
	done := waitFor(30*time.Second, func() bool {
		segs = segments(t, dir)
		start = offsets(t, adm, topic, false)[0]
		total = 0
		for _, s := range segs {
			total += s.logSize
		}
		return len(segs) > 0 && start > 0 && start == segs[0].base && total-segs[0].logSize < retentionBytes
	})
	if !done {
		t.Fatalf("retention did not run within 30s: log start %d, %d bytes in segments %+v", start, total, segs)
	}
	t.Logf("after retention: log start %d, %d bytes in %d segments", start, total, len(segs))

	if len(segs) < 2 {
		t.Errorf("%d segments remain; want several at segment.bytes=%d", len(segs), segmentBytes)
	}
	for _, s := range segs {
		if !s.index || !s.timeindex || !s.firstBatchPresent {
			t.Errorf("segment %020d: index %v, timeindex %v, log with a batch %v; want all three files", s.base, s.index, s.timeindex, s.firstBatchPresent)
		}
		if s.firstBatchPresent && s.firstBatchOffset != s.base {
			t.Errorf("segment %020d starts with a batch at offset %d", s.base, s.firstBatchOffset)
		}
		if s.logSize > segmentBytes {
			t.Errorf("segment %020d holds %d bytes, over segment.bytes %d", s.base, s.logSize, segmentBytes)
		}
	}
	// Kafka deletes the oldest segment only while what remains stays at
	// or above retention.bytes.
	if total < retentionBytes {
		t.Errorf("retention left %d bytes, below retention.bytes %d: it deleted too much", total, retentionBytes)
	}

	ends := offsets(t, adm, topic, true)
	if ends[0] != n {
		t.Fatalf("end offset %d, want %d", ends[0], n)
	}
	recs := consume(t, addr, topic, map[int32]int64{0: start}, ends)
	if int64(len(recs[0])) != n-start {
		t.Fatalf("consumed %d records from %d, want %d", len(recs[0]), start, n-start)
	}
	for i, r := range recs[0] {
		if want := start + int64(i); r.Offset != want || string(r.Value) != string(retainedValue(want)) || r.Timestamp.UnixMilli() != ts0+tsStep*want {
			t.Fatalf("record %d from the log start: offset %d, want %d with its value and timestamp", i, r.Offset, want)
		}
	}

	if len(segs) >= 2 {
		b := segs[1].base // a segment boundary
		for _, ts := range []int64{ts0 + tsStep*b, ts0 + tsStep*b - tsStep/2, ts0 + tsStep*b + 1} {
			checkTimestampLookup(t, adm, topic, ts, recs, ends)
		}
	}
	checkTimestampLookup(t, adm, topic, ts0, recs, ends)               // before the log start: the log start
	checkTimestampLookup(t, adm, topic, ts0+tsStep*(n+10), recs, ends) // after the last record: the end
}

// retainedValue is record i of the retention test: ~1 KiB.
func retainedValue(i int64) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 11))
	v := fmt.Appendf(nil, "retained-%06d-", i)
	for range 1000 {
		v = append(v, 'a'+byte(r.IntN(26)))
	}
	return v
}
