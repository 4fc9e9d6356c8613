package log

import (
	"errors"
	"math"
	"os"
	"testing"
	"time"
)

// TestFlushWritesProducerSnapshot: Maintain's flush (flush.ms) writes a
// producer snapshot at the offset it made durable, at most every
// snapshotInterval, so a crash of a flushed log restarts from it; the
// producer state after the crash is the same as before.
func TestFlushWritesProducerSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1 << 20 // one segment: no roll writes a snapshot
	cfg.FlushMs = 1
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var m model
	var last AppendResult
	for i := range 10 {
		last = appendBatch(t, l, &m, idem(7, 0, int32(3*i), 3))
	}
	if got := segmentFiles(t, dir, snapshotSuffix); len(got) != 0 {
		t.Fatalf("snapshots before any flush: %v", got)
	}
	now := time.Now().Add(time.Minute) // flush.ms and the snapshot interval passed
	if err := l.Maintain(now, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	flushed := l.EndOffset()
	if _, err := os.Stat(snapshotPath(dir, flushed)); err != nil {
		t.Fatalf("no producer snapshot at the flushed end %d: %v", flushed, err)
	}
	// More appends and another flush within the interval: no new snapshot.
	appendBatch(t, l, &m, plain(2, 100, 1))
	if err := l.Maintain(now.Add(snapshotInterval/2), math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir, snapshotSuffix); len(got) != 1 {
		t.Fatalf("snapshots after a second flush within %v: %v, want only the one at %d", snapshotInterval, got, flushed)
	}
	crash(l)

	l = openLog(t, dir, cfg)
	if got := l.EndOffset(); got != m.end() {
		t.Fatalf("end offset after the crash %d, want %d", got, m.end())
	}
	res, err := appendErr(l, idem(7, 0, 27, 3))
	if err != nil || !res.Duplicate || res.BaseOffset != last.BaseOffset {
		t.Fatalf("retry of the last batch after the crash: %+v %v, want a duplicate at %d", res, err, last.BaseOffset)
	}
	if _, err := appendErr(l, idem(7, 0, 31, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after the crash: %v", err)
	}
	if res, err := appendErr(l, idem(7, 0, 30, 1)); err != nil || res.Duplicate {
		t.Fatalf("next sequence after the crash: %+v %v", res, err)
	}
}

// TestFlushSnapshotAfterRoll: with the default flush settings
// Maintain flushes only after a roll, whose own snapshot is recent: it
// writes no other.
func TestFlushSnapshotAfterRoll(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(nil) // 4 KiB segments
	l := openLog(t, dir, cfg)
	var m model
	for range 20 {
		appendBatch(t, l, &m, plain(2, 300, 1))
	}
	rolls := segmentFiles(t, dir, snapshotSuffix)
	if len(rolls) == 0 {
		t.Fatal("no roll wrote a snapshot")
	}
	if err := l.Maintain(time.Now(), math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir, snapshotSuffix); len(got) != len(rolls) || got[len(got)-1] != rolls[len(rolls)-1] {
		t.Fatalf("snapshots after the flush that follows a roll: %v, want %v", got, rolls)
	}
}
