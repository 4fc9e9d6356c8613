package log

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"
)

// timedLog makes a log with one batch per segment at the given timestamps
// (each segment rolled by time) and returns it with its model.
func timedLog(t *testing.T, dir string, tss ...int64) (*Log, *model) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentMs = 50
	l := openLog(t, dir, cfg)
	var m model
	for _, ts := range tss {
		appendBatch(t, l, &m, plain(2, 100, ts))
	}
	return l, &m
}

func TestRollByBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1000
	l := openLog(t, dir, cfg)
	var m model
	for range 5 {
		appendBatch(t, l, &m, plain(1, 400, 1)) // ~470 bytes: two per segment
	}
	logs := segmentFiles(t, dir, ".log")
	if len(logs) != 3 {
		t.Fatalf("%d segments, want 3", len(logs))
	}
	for i, p := range logs[:2] {
		if sz := fileSize(t, p); sz > 1000 || sz != int64(len(m.batches[2*i])+len(m.batches[2*i+1])) {
			t.Fatalf("segment %d has %d bytes", i, sz)
		}
	}
	if want := segName(m.heads[2].BaseOffset) + ".log"; logs[1][len(logs[1])-len(want):] != want {
		t.Fatalf("second segment named %s, want %s", logs[1], want)
	}
}

func TestRollByTime(t *testing.T) {
	dir := t.TempDir()
	// 100 and 140 share a segment (40 <= 50 ms); 151 is 51 ms after the
	// segment's first batch max timestamp (101).
	l, m := timedLog(t, dir, 100, 140, 152, 160)
	if n := len(segmentFiles(t, dir, ".log")); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	// Maintain rolls an active segment whose first batch is older than segment.ms.
	if err := l.Maintain(time.UnixMilli(153+50), noHW); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentFiles(t, dir, ".log")); n != 2 {
		t.Fatalf("rolled too early: %d segments", n)
	}
	if err := l.Maintain(time.UnixMilli(153+51), noHW); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentFiles(t, dir, ".log")); n != 3 {
		t.Fatalf("%d segments after Maintain, want 3", n)
	}
	appendBatch(t, l, m, plain(1, 1, 300))
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs")
	}
}

func TestRetentionMs(t *testing.T) {
	dir := t.TempDir()
	l, m := timedLog(t, dir, 1000, 2000, 3000, 4000)
	cfg := l.config()
	cfg.RetentionMs = 1500
	l.SetConfig(cfg)
	// Segment max timestamps are 1001, 2001, 3001 (active: 4001).
	n, err := l.ApplyRetention(time.UnixMilli(3501), noHW)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d segments (%v), want 1", n, err)
	}
	if l.StartOffset() != m.heads[1].BaseOffset {
		t.Fatalf("start offset %d, want %d", l.StartOffset(), m.heads[1].BaseOffset)
	}
	if _, err := l.Read(0, 100, l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of deleted offset: %v", err)
	}
	// Far in the future every segment is expired, the active one too: it
	// is rolled and deleted (Kafka's rule), leaving one empty segment at
	// the log end.
	end := l.EndOffset()
	n, err = l.ApplyRetention(time.UnixMilli(1<<40), noHW)
	if err != nil || n != 3 {
		t.Fatalf("deleted %d segments (%v), want 3", n, err)
	}
	if logs := segmentFiles(t, dir, ".log"); len(logs) != 1 || logs[0] != dir+"/"+segName(end)+".log" {
		t.Fatalf("remaining segments %v, want one at %d", logs, end)
	}
	if l.StartOffset() != end || l.EndOffset() != end {
		t.Fatalf("start %d end %d, want both %d", l.StartOffset(), l.EndOffset(), end)
	}
	// Appends go on at the same offsets.
	if res, err := l.Append(makeBatch(plain(1, 10, 5000)), AppendOptions{LeaderEpoch: -1}); err != nil || res.BaseOffset != end {
		t.Fatalf("append after full expiry: %+v %v", res, err)
	}
}

func TestSliceSurvivesRetention(t *testing.T) {
	dir := t.TempDir()
	l, m := timedLog(t, dir, 1000, 2000, 3000)
	s, err := l.Read(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := l.config()
	cfg.RetentionMs = 0
	l.SetConfig(cfg)
	if n, err := l.ApplyRetention(time.UnixMilli(1<<40), noHW); n != 3 || err != nil {
		t.Fatalf("deleted %d (%v), want all 3", n, err)
	}
	if err := l.Maintain(time.Now().Add(time.Hour), noHW); err != nil {
		t.Fatal(err)
	}
	got, err := s.Bytes(nil)
	if err != nil || !bytes.Equal(got, m.batches[0]) {
		t.Fatalf("slice of deleted segment: %d bytes, %v", len(got), err)
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	var m model
	fill(t, l, &m, 100, 10, 1000)
	i := len(m.batches) / 2
	// Truncating inside a batch removes the whole batch.
	if err := l.Truncate(m.heads[i].BaseOffset + int64(m.heads[i].LastOffsetDelta)); err != nil {
		t.Fatal(err)
	}
	m.truncate(i)
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatalf("after truncate end %d want %d", l.EndOffset(), m.end())
	}
	fill(t, l, &m, 30, 11, 50000)
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("append after truncate differs")
	}
	crash(l)
	l = openLog(t, dir, testConfig(nil))
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after truncate and crash")
	}
	if err := l.Truncate(0); err != nil || l.EndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("truncate to 0: %v end %d", err, l.EndOffset())
	}
}

// noHW is the high watermark of a log without replicas to wait for.
const noHW = math.MaxInt64

// Fault 2 of issue 9: retention ignored the high watermark, so records with
// old timestamps (a backfill, MirrorMaker) were deleted before followers
// had fetched them. Only segments wholly below the high watermark may go,
// by time or by size, and the log start never passes it.
func TestRetentionStopsAtHighWatermark(t *testing.T) {
	dir := t.TempDir()
	// Four segments of one batch (two records) each, all long expired.
	l, m := timedLog(t, dir, 1000, 2000, 3000, 4000)
	cfg := l.config()
	cfg.RetentionMs = 1
	l.SetConfig(cfg)
	now := time.UnixMilli(1 << 40)
	// The high watermark inside the second segment: only the first goes.
	hw := m.heads[1].BaseOffset + 1
	if n, err := l.ApplyRetention(now, hw); err != nil || n != 1 {
		t.Fatalf("retention below hw %d deleted %d segments (%v), want 1", hw, n, err)
	}
	if got := l.StartOffset(); got != m.heads[1].BaseOffset || got > hw {
		t.Fatalf("log start %d, want %d (hw %d)", got, m.heads[1].BaseOffset, hw)
	}
	// Maintain passes the bound on.
	if err := l.Maintain(now, hw); err != nil || l.StartOffset() != m.heads[1].BaseOffset {
		t.Fatalf("Maintain below hw %d: start %d (%v)", hw, l.StartOffset(), err)
	}
	// retention.bytes is bounded the same way.
	cfg.RetentionMs, cfg.RetentionBytes = -1, 0
	l.SetConfig(cfg)
	hw = m.heads[3].BaseOffset // the active segment's base
	if n, err := l.ApplyRetention(now, hw); err != nil || n != 2 || l.StartOffset() != hw {
		t.Fatalf("retention.bytes below hw %d deleted %d (%v), start %d", hw, n, err, l.StartOffset())
	}
	// The expired active segment is not rolled away while any of it is
	// above the high watermark...
	cfg.RetentionMs, cfg.RetentionBytes = 1, -1
	l.SetConfig(cfg)
	if n, err := l.ApplyRetention(now, l.EndOffset()-1); err != nil || n != 0 {
		t.Fatalf("active segment above hw: deleted %d (%v)", n, err)
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(3)) {
		t.Fatal("records at or above the high watermark changed")
	}
	// ...and is once all of it is below.
	end := l.EndOffset()
	if n, err := l.ApplyRetention(now, end); err != nil || n != 1 || l.StartOffset() != end {
		t.Fatalf("active segment below hw: deleted %d (%v), start %d, want %d", n, err, l.StartOffset(), end)
	}
}
