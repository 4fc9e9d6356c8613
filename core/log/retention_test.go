package log

import (
	"bytes"
	"errors"
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
	if err := l.Maintain(time.UnixMilli(153 + 50)); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentFiles(t, dir, ".log")); n != 2 {
		t.Fatalf("rolled too early: %d segments", n)
	}
	if err := l.Maintain(time.UnixMilli(153 + 51)); err != nil {
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
	n, err := l.ApplyRetention(time.UnixMilli(3501))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d segments (%v), want 1", n, err)
	}
	if l.StartOffset() != m.heads[1].BaseOffset {
		t.Fatalf("start offset %d, want %d", l.StartOffset(), m.heads[1].BaseOffset)
	}
	if _, err := l.Read(0, 100, l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of deleted offset: %v", err)
	}
	// Far in the future everything but the active segment goes.
	n, err = l.ApplyRetention(time.UnixMilli(1 << 40))
	if err != nil || n != 2 {
		t.Fatalf("deleted %d segments (%v), want 2", n, err)
	}
	if logs := segmentFiles(t, dir, ".log"); len(logs) != 1 || logs[0] != dir+"/"+segName(m.heads[3].BaseOffset)+".log" {
		t.Fatalf("remaining segments %v", logs)
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(3)) {
		t.Fatal("active segment content differs")
	}
	// The start offset survives a crash (derived from the first segment).
	crash(l)
	l = openLog(t, dir, l.config())
	if l.StartOffset() != m.heads[3].BaseOffset {
		t.Fatalf("start offset %d after reopen", l.StartOffset())
	}
}

func TestRetentionBytes(t *testing.T) {
	dir := t.TempDir()
	l, m := timedLog(t, dir, 1000, 2000, 3000, 4000, 5000)
	seg := int64(len(m.batches[0]))
	cfg := l.config()
	// Kafka deletes a segment only if the rest still reaches the limit:
	// with 2 segments' worth exactly two remain; one byte more keeps three.
	cfg.RetentionBytes = 2*seg + 1
	l.SetConfig(cfg)
	if n, err := l.ApplyRetention(time.UnixMilli(0)); err != nil || n != 2 {
		t.Fatalf("deleted %d segments (%v), want 2", n, err)
	}
	cfg.RetentionBytes = 2 * seg
	l.SetConfig(cfg)
	n, err := l.ApplyRetention(time.UnixMilli(0))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d segments (%v), want 1 more", n, err)
	}
	if l.Size() != 2*seg || l.StartOffset() != m.heads[3].BaseOffset {
		t.Fatalf("size %d start %d", l.Size(), l.StartOffset())
	}
	if len(segmentFiles(t, dir, ".log")) != 2 || len(segmentFiles(t, dir, ".index")) != 2 {
		t.Fatal("segment files not deleted")
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	l, m := timedLog(t, dir, 1000, 2000, 3000, 4000)
	mid := m.heads[1].BaseOffset + 1 // inside the second segment's batch
	start, err := l.DeleteRecordsBefore(mid)
	if err != nil || start != mid || l.StartOffset() != mid {
		t.Fatalf("start %d (%v), want %d", start, err, mid)
	}
	if len(segmentFiles(t, dir, ".log")) != 3 {
		t.Fatal("first segment not deleted")
	}
	if _, err := l.Read(mid-1, 100, l.EndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	if got := readBytes(t, l, mid, 1, l.EndOffset()); !bytes.Equal(got, m.batches[1]) {
		t.Fatal("read at new start does not return its batch")
	}
	if _, err := l.DeleteRecordsBefore(l.EndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("delete beyond end: %v", err)
	}
	if s, _ := l.DeleteRecordsBefore(1); s != mid {
		t.Fatalf("moving start backwards returned %d", s)
	}
	// Persisted: survives a crash.
	crash(l)
	l = openLog(t, dir, l.config())
	if l.StartOffset() != mid {
		t.Fatalf("start offset %d after reopen, want %d", l.StartOffset(), mid)
	}
	// Up to the end: the active segment stays, nothing is readable.
	end := l.EndOffset()
	if _, err := l.DeleteRecordsBefore(end); err != nil {
		t.Fatal(err)
	}
	if got := readBytes(t, l, end, 100, end); len(got) != 0 || len(segmentFiles(t, dir, ".log")) != 1 {
		t.Fatal("delete to end left data or segments")
	}
}

func TestOffsetForTime(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.IndexIntervalBytes = 1 // index every batch
	cfg.SegmentBytes = 1 << 20
	l := openLog(t, dir, cfg)
	var m model
	// Segment 0: batches with max timestamps 101, 201; segment 1: 301,
	// 1001 (out of order), 601; segment 2 (active): 701.
	for _, ts := range []int64{100, 200, -1, 300, 1000, 600, -1, 700} {
		if ts < 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		appendBatch(t, l, &m, plain(2, 10, ts))
	}
	// Record i of a batch at ts has timestamp ts+i; batches hold 2 records.
	cases := []struct{ ts, off, gotTs int64 }{
		{0, 0, 100},
		{101, 1, 101},
		{102, 2, 200},
		{202, 4, 300}, // between segments: the next segment's first record
		{301, 5, 301},
		{302, 6, 1000},
		{650, 6, 1000}, // first in offset order, not the closest timestamp
		{1001, 7, 1001},
		{1002, -1, -1},
	}
	for _, c := range cases {
		off, ts, err := l.OffsetForTime(c.ts)
		if err != nil || off != c.off || ts != c.gotTs {
			t.Errorf("OffsetForTime(%d) = %d, %d, %v; want %d, %d", c.ts, off, ts, err, c.off, c.gotTs)
		}
	}
	if ts, off := l.MaxTimestamp(); ts != 1001 || off != 7 {
		t.Errorf("MaxTimestamp = %d, %d; want 1001, 7", ts, off)
	}
	// The log start bounds the answer.
	if _, err := l.DeleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	if off, ts, _ := l.OffsetForTime(0); off != 1 || ts != 101 {
		t.Errorf("OffsetForTime(0) after DeleteRecords(1) = %d, %d; want 1, 101", off, ts)
	}
	// After a restart the time indexes answer the same.
	l.Close()
	l = openLog(t, dir, cfg)
	for _, c := range cases[1:] {
		if off, ts, _ := l.OffsetForTime(c.ts); off != c.off || ts != c.gotTs {
			t.Errorf("after reopen OffsetForTime(%d) = %d, %d", c.ts, off, ts)
		}
	}
	if ts, off := l.MaxTimestamp(); ts != 1001 || off != 7 {
		t.Errorf("after reopen MaxTimestamp = %d, %d", ts, off)
	}
}

func TestMaxTimestampEmpty(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(nil))
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("empty log MaxTimestamp = %d, %d", ts, off)
	}
	if off, ts, err := l.OffsetForTime(0); off != -1 || ts != -1 || err != nil {
		t.Fatalf("empty log OffsetForTime = %d, %d, %v", off, ts, err)
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
	if n, err := l.ApplyRetention(time.UnixMilli(1 << 40)); n != 2 || err != nil {
		t.Fatalf("deleted %d (%v)", n, err)
	}
	if err := l.Maintain(time.Now().Add(time.Hour)); err != nil {
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
