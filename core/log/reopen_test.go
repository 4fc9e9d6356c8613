package log

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func timeAfter(sec int) time.Time { return time.Now().Add(time.Duration(sec) * time.Second) }

func TestReopenClean(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, testConfig(&logs))
	var m model
	fill(t, l, &m, 200, 3, 1000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker: %v", err)
	}
	l = openLog(t, dir, testConfig(&logs))
	if strings.Contains(logs.String(), "recovered segment") {
		t.Fatalf("clean reopen scanned segments:\n%s", logs.String())
	}
	// The marker stays until the first change: reading does not remove it.
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("marker gone before any change: %v", err)
	}
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after clean reopen")
	}
	// Appends continue at the right offset and offsets/time survive.
	res := appendBatch(t, l, &m, plain(2, 10, 99999))
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("marker still present after an append: %v", err)
	}
	if res.BaseOffset != m.heads[len(m.heads)-1].BaseOffset {
		t.Fatalf("append after reopen at %d", res.BaseOffset)
	}
	if ts, _ := l.MaxTimestamp(); ts != 99999+1 {
		t.Fatalf("max timestamp %d after reopen", ts)
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after append")
	}
}

func TestReopenAfterCrash(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, testConfig(&logs))
	var m model
	fill(t, l, &m, 100, 4, 1000)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	fill(t, l, &m, 100, 5, 5000)
	crash(l)
	l = openLog(t, dir, testConfig(&logs))
	if !strings.Contains(logs.String(), "recovered segment") {
		t.Fatal("reopen after crash did not scan")
	}
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after crash reopen")
	}
	// Recovery flushed and recorded the files as a clean Close would: a
	// second crash before any change scans nothing.
	crash(l)
	logs = logBuffer{}
	l = openLog(t, dir, testConfig(&logs))
	if n := strings.Count(logs.String(), "recovered segment"); n != 0 {
		t.Fatalf("second crash recovery scanned %d segments, want 0", n)
	}
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after second crash reopen")
	}
	// After a change, a crash scans from the recovery point's segment on:
	// the active one.
	appendBatch(t, l, &m, plain(2, 10, 9000))
	crash(l)
	logs = logBuffer{}
	l = openLog(t, dir, testConfig(&logs))
	if n := strings.Count(logs.String(), "recovered segment"); n != 1 {
		t.Fatalf("third crash recovery scanned %d segments, want 1", n)
	}
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after third crash reopen")
	}
}

func TestIndexFilesSizedToContent(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	fill(t, l, nil, 100, 6, 1000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range segmentFiles(t, dir, ".index") {
		if sz := fileSize(t, p); sz%offsetEntrySize != 0 || sz > 4096/256*offsetEntrySize+offsetEntrySize {
			t.Fatalf("%s has %d bytes", p, sz)
		}
	}
	nonEmpty := 0
	for _, p := range segmentFiles(t, dir, ".timeindex") {
		sz := fileSize(t, p)
		if sz%timeEntrySize != 0 {
			t.Fatalf("%s has %d bytes", p, sz)
		}
		if sz > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < len(segmentFiles(t, dir, ".log"))-1 {
		t.Fatal("rolled segments lack time index entries")
	}
}

func TestDamagedIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	var m model
	fill(t, l, &m, 100, 7, 1000)
	l.Close()
	idx := segmentFiles(t, dir, ".index")
	if err := os.WriteFile(idx[1], bytes.Repeat([]byte{0xff}, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segmentFiles(t, dir, ".timeindex")[2]); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig(nil))
	if !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs with damaged indexes")
	}
	for off := m.heads[0].BaseOffset; off < m.end(); off += 7 {
		if got := readBytes(t, l, off, 1, m.end()); !bytes.Equal(got, m.batches[m.find(off)]) {
			t.Fatalf("read %d wrong with rebuilt index", off)
		}
	}
}

// TestCleanMarkerSurvivesReadOnlyRun: a log reopened after a clean
// shutdown and crashed without a change is still clean (the marker still
// describes the files), and one crashed after a change is recovered.
func TestCleanMarkerSurvivesReadOnlyRun(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, testConfig(&logs))
	var m model
	fill(t, l, &m, 100, 3, 1000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig(&logs))
	readAll(t, l)
	crash(l)
	l = openLog(t, dir, testConfig(&logs))
	if strings.Contains(logs.String(), "recover") {
		t.Fatalf("a read-only run made the next open recover:\n%s", logs.String())
	}
	appendBatch(t, l, &m, plain(2, 10, 5000))
	crash(l)
	l = openLog(t, dir, testConfig(&logs))
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after a crash following a change")
	}
}

// TestStaleCleanMarkerIsNotTrusted: a marker whose table no longer matches
// the files (here: bytes appended to the active segment behind the log's
// back, as a lost marker deletion would leave them) sends Open to recovery.
func TestStaleCleanMarkerIsNotTrusted(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, testConfig(&logs))
	var m model
	fill(t, l, &m, 100, 3, 1000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	bases, err := (&Log{dir: dir}).listSegments()
	if err != nil {
		t.Fatal(err)
	}
	active := filepath.Join(dir, segName(bases[len(bases)-1])+logSuffix)
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte{0xab}, 100)) // garbage past the recorded size
	f.Close()
	l = openLog(t, dir, testConfig(&logs))
	if !strings.Contains(logs.String(), "recovering") {
		t.Fatalf("a stale marker was trusted:\n%s", logs.String())
	}
	if l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatal("content differs after recovering past a stale marker")
	}
}

// TestCloseAfterReadOnlyRunWritesNothing: a log opened from a clean
// shutdown and closed without a change (a broker restarted and stopped,
// its idle partitions) fsyncs and rewrites nothing, and the next Open
// still trusts the marker; after a change Close writes it afresh.
func TestCloseAfterReadOnlyRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, testConfig(&logs))
	var m model
	fill(t, l, &m, 100, 3, 1000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, cleanShutdownFile)
	before, err := os.Stat(marker)
	if err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig(&logs))
	readAll(t, l)
	syncs := fsyncs.Load()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load() - syncs; n != 0 {
		t.Errorf("closing an unchanged log made %d fsyncs", n)
	}
	if after, err := os.Stat(marker); err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("closing an unchanged log rewrote the marker (%v)", err)
	}
	l = openLog(t, dir, testConfig(&logs))
	if strings.Contains(logs.String(), "recover") {
		t.Fatalf("the marker was not trusted after a read-only run:\n%s", logs.String())
	}
	appendBatch(t, l, &m, plain(2, 10, 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	end, _, err := readCleanMarker(dir)
	if err != nil || end != m.end() {
		t.Fatalf("marker after a change: end %d, %v; want %d", end, err, m.end())
	}
	l = openLog(t, dir, testConfig(&logs))
	if strings.Contains(logs.String(), "recover") || l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatalf("content differs after closing a changed log (end %d, want %d):\n%s", l.EndOffset(), m.end(), logs.String())
	}
}

// TestCloseOfNewLogWritesLittle: closing a log that never held a record
// (a new partition never produced to) writes the clean-shutdown marker and
// nothing else (no empty index files, snapshot or recovery point), and the
// next Open trusts it.
func TestCloseOfNewLogWritesLittle(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	l := openLog(t, dir, testConfig(&logs))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{segName(0) + logSuffix, cleanShutdownFile}; !slices.Equal(names, want) {
		t.Errorf("files after closing a new log: %v, want %v", names, want)
	}
	l = openLog(t, dir, testConfig(&logs))
	if strings.Contains(logs.String(), "recover") {
		t.Fatalf("a new log's marker was not trusted:\n%s", logs.String())
	}
	var m model
	appendBatch(t, l, &m, plain(2, 10, 5000))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig(&logs))
	if strings.Contains(logs.String(), "recover") || l.EndOffset() != m.end() || !bytes.Equal(readAll(t, l), m.bytesFrom(0)) {
		t.Fatalf("after a record and a clean close: end %d, want %d:\n%s", l.EndOffset(), m.end(), logs.String())
	}
}
