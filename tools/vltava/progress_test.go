package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestRenderProgress(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		want        string
	}{
		{34000, 100000, "produce [##########--------------------]  34%  34,000/100,000  12s"},
		{0, 10, "produce [------------------------------]   0%  0/10  12s"},
		{15, 10, "produce [##############################] 100%  15/10  12s"},
		{1234567, 0, "produce 1,234,567  12s"},
	} {
		if got := renderProgress("produce", c.done, c.total, 12500*time.Millisecond); got != c.want {
			t.Errorf("renderProgress(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
}

// TestProgressOnlyOnTerminal: no bar when stdout or stderr is not a
// terminal (a pipe, a file, a buffer) or with JSON output; a nil bar
// does nothing.
func TestProgressOnlyOnTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	src := func() (int64, int64) { return 1, 2 }
	for _, e := range []*env{
		{stdout: w, stderr: w},
		{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}},
	} {
		if bar := startProgress(e, "x", false, src); bar != nil {
			bar.Stop()
			t.Errorf("a bar on %T", e.stderr)
		}
	}
	if isTerminal(w) {
		t.Error("a pipe is a terminal")
	}
	var bar *progressBar
	var buf bytes.Buffer
	if bar.Writer(&buf) != &buf {
		t.Error("a nil bar wraps its writer")
	}
	bar.Stop()
}

// TestProgressBarErasesItself: the bar redraws in place, lines written
// through Writer start on an erased line, and Stop leaves the line empty.
func TestProgressBarErasesItself(t *testing.T) {
	var out syncBuffer
	bar := newProgressBar(&out, "produce", func() (int64, int64) { return 5, 10 })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), " 50%") {
		if time.Now().After(deadline) {
			t.Fatalf("no bar drawn: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	bar.Writer(&out).Write([]byte("a progress line\n"))
	bar.Stop()
	bar.Stop()
	got := out.String()
	if !strings.Contains(got, "\r\x1b[Ka progress line\n") {
		t.Errorf("the line was not written on an erased line: %q", got)
	}
	if !strings.HasSuffix(got, "\n") && !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("the bar is left on screen after Stop: %q", got)
	}
}
