package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// progressRedraw is how often a progress bar is drawn again.
const progressRedraw = 200 * time.Millisecond

// progressWidth is the number of cells of the bar itself.
const progressWidth = 30

// progressBar draws one line on a terminal's stderr while long work runs:
//
//	produce [##########--------------------]  34%  34,000/100,000  12s
//
// It polls its source every progressRedraw, redrawing the line in place
// (carriage return, erase line), and erases it when it stops. Lines the
// command prints meanwhile go through Writer, which erases the bar first
// and draws it again after, so they never interleave with it. A nil
// *progressBar (no terminal, or JSON output) does nothing, and its Writer
// is the writer given.
type progressBar struct {
	w      io.Writer
	label  string
	source func() (done, total int64)
	start  time.Time

	mu    sync.Mutex // orders the bar's drawing with Writer's lines
	drawn bool       // the bar is on screen; guarded by mu

	stopCh chan struct{}
	wg     sync.WaitGroup
}

// startProgress starts a progress bar for label on e's stderr if both
// stdout and stderr are terminals and asJSON is false; otherwise it
// returns nil, which is a valid bar that draws nothing. source reports
// how much of how much is done (total <= 0: unknown, then only the count
// and the elapsed time are shown).
func startProgress(e *env, label string, asJSON bool, source func() (done, total int64)) *progressBar {
	if asJSON || !isTerminal(e.stdout) || !isTerminal(e.stderr) {
		return nil
	}
	return newProgressBar(e.stderr, label, source)
}

// newProgressBar starts a bar on w without checking that w is a terminal.
func newProgressBar(w io.Writer, label string, source func() (done, total int64)) *progressBar {
	p := &progressBar{w: w, label: label, source: source, start: time.Now(), stopCh: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(progressRedraw)
		defer t.Stop()
		for {
			select {
			case <-p.stopCh:
				return
			case <-t.C:
				p.mu.Lock()
				p.drawLocked()
				p.mu.Unlock()
			}
		}
	})
	return p
}

// Stop stops the bar and erases it. It may be called more than once.
func (p *progressBar) Stop() {
	if p == nil {
		return
	}
	select {
	case <-p.stopCh:
		return
	default:
	}
	close(p.stopCh)
	p.wg.Wait()
	p.mu.Lock()
	p.eraseLocked()
	p.mu.Unlock()
}

// Writer returns w wrapped so that what is written to it does not mix
// with the bar (w should be the same terminal).
func (p *progressBar) Writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return progressLines{p, w}
}

type progressLines struct {
	p *progressBar
	w io.Writer
}

func (l progressLines) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.p.eraseLocked()
	return l.w.Write(b)
}

func (p *progressBar) eraseLocked() {
	if p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

func (p *progressBar) drawLocked() {
	done, total := p.source()
	io.WriteString(p.w, "\r\x1b[K"+renderProgress(p.label, done, total, time.Since(p.start)))
	p.drawn = true
}

// renderProgress is the bar's line (without the carriage return).
func renderProgress(label string, done, total int64, elapsed time.Duration) string {
	secs := elapsed.Truncate(time.Second)
	if total <= 0 {
		return fmt.Sprintf("%s %s  %v", label, thousands(done), secs)
	}
	frac := min(max(float64(done)/float64(total), 0), 1)
	full := int(frac * progressWidth)
	bar := strings.Repeat("#", full) + strings.Repeat("-", progressWidth-full)
	return fmt.Sprintf("%s [%s] %3d%%  %s/%s  %v", label, bar, int(frac*100), thousands(done), thousands(total), secs)
}

// thousands writes n with comma separators (12,345).
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// isTerminal reports whether w is a terminal (a character device that
// answers the terminal ioctl).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
