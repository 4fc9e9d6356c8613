package log

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openFDs counts this process's descriptors that are segment .log files
// under dir.
func openFDs(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.HasSuffix(target, logSuffix) {
			n++
		}
	}
	return n
}

// TestOpenFilesStayWithinBudget opens many more logs than the budget
// allows, appends to each and reads each back: every operation succeeds,
// and the segment files open never exceed the budget (plus those pinned
// by the operation in progress).
func TestOpenFilesStayWithinBudget(t *testing.T) {
	const budget, logs = 20, 120
	prev := SetMaxOpenFiles(budget)
	t.Cleanup(func() { SetMaxOpenFiles(prev) })
	dir := t.TempDir()
	var ls []*Log
	var models []*model
	for i := range logs {
		l := openLog(t, filepath.Join(dir, fmt.Sprintf("t-%d", i)), testConfig(nil))
		ls = append(ls, l)
		models = append(models, &model{})
	}
	for round := range 3 {
		for i, l := range ls {
			fill(t, l, models[i], 2, 1, 200)
			if n := openFDs(t, dir); n > budget+1 {
				t.Fatalf("round %d, log %d: %d segment files open, budget %d", round, i, n, budget)
			}
		}
	}
	for i, l := range ls {
		if got := readAll(t, l); !bytes.Equal(got, models[i].bytesFrom(0)) {
			t.Fatalf("log %d reads back %d bytes, want %d", i, len(got), len(models[i].bytesFrom(0)))
		}
	}
	open, b, evicted := OpenFiles()
	if open > b+1 || evicted == 0 {
		t.Errorf("budget: %d open of %d, %d evicted; want within budget with evictions", open, b, evicted)
	}
}

// TestBudgetNeverClosesAFileInUse holds slices of every log while the
// budget is far too small: the pinned files stay readable.
func TestBudgetNeverClosesAFileInUse(t *testing.T) {
	prev := SetMaxOpenFiles(16)
	t.Cleanup(func() { SetMaxOpenFiles(prev) })
	dir := t.TempDir()
	var slices []*Slice
	var want [][]byte
	for i := range 40 {
		l := openLog(t, filepath.Join(dir, fmt.Sprintf("p-%d", i)), testConfig(nil))
		var m model
		fill(t, l, &m, 3, 1, 100)
		s, err := l.Read(0, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		slices = append(slices, s)
		want = append(want, m.bytesFrom(0))
	}
	for i, s := range slices {
		buf := make([]byte, s.Len())
		if _, err := s.File().ReadAt(buf, s.Pos()); err != nil {
			t.Fatalf("slice %d unreadable after the budget evicted: %v", i, err)
		}
		if !bytes.Equal(buf, want[i]) {
			t.Fatalf("slice %d reads other bytes", i)
		}
		s.Close()
	}
}
