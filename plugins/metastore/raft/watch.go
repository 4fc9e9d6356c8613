package raft

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vltava/vltava/plugins/sdk"
)

// history is a bounded ring of this node's recent events, oldest first,
// filled by Apply, so a watch can start from a past revision.
//
// INVARIANT: every event with a revision > compacted that this node has
// applied is in the ring, in revision order.
type history struct {
	buf       []*sdk.WatchEvent
	start, n  int
	compacted int64 // highest revision some event of which is gone
}

func newHistory(max int) history { return history{buf: make([]*sdk.WatchEvent, max)} }

func (h *history) add(ev *sdk.WatchEvent) {
	if ev.Revision <= h.compacted { // compacted ahead of this node's log
		return
	}
	if h.n == len(h.buf) {
		h.dropOldest()
	}
	h.buf[(h.start+h.n)%len(h.buf)] = ev
	h.n++
}

func (h *history) dropOldest() {
	ev := h.buf[h.start]
	h.buf[h.start] = nil
	h.start = (h.start + 1) % len(h.buf)
	h.n--
	h.compacted = max(h.compacted, ev.Revision)
}

// compact drops events at and below rev.
func (h *history) compact(rev int64) {
	for h.n > 0 && h.buf[h.start].Revision <= rev {
		h.dropOldest()
	}
	h.compacted = max(h.compacted, rev)
}

// reset empties the ring after a snapshot restore at rev.
func (h *history) reset(rev int64) {
	clear(h.buf)
	h.start, h.n, h.compacted = 0, 0, rev
}

// since returns the held events above rev whose key has the prefix.
func (h *history) since(rev int64, prefix string) []*sdk.WatchEvent {
	var out []*sdk.WatchEvent
	for i := range h.n {
		ev := h.buf[(h.start+i)%len(h.buf)]
		if ev.Revision > rev && strings.HasPrefix(ev.Key, prefix) {
			out = append(out, ev)
		}
	}
	return out
}

// watcher is one Watch stream, fed by this node's Apply. Live events go
// on ch without blocking; a full ch ends the stream with
// sdk.ErrWatchOverflow, so a slow watcher never stalls the state machine.
type watcher struct {
	f       *fsm
	prefix  string
	after   int64             // deliver only revisions above this
	backlog []*sdk.WatchEvent // catch-up from history; only Recv touches it

	// ch is sent on and closed only under f.mu, after err is set.
	// INVARIANT: ch is closed exactly when the watcher left f.watchers.
	ch  chan *sdk.WatchEvent
	err error

	stopOnce sync.Once
	stopCh   chan struct{} // closed by Close or when ctx ends
	stopErr  error
	stopCtx  func() bool
}

// watch registers a watcher for changes above after. With fromNow, after
// is raised to this node's revision if that is higher (changes between
// the two are concurrent with the Watch call, so skipping them is allowed).
func (f *fsm) watch(prefix string, after int64, fromNow bool) (*watcher, error) {
	w := &watcher{f: f, prefix: prefix, ch: make(chan *sdk.WatchEvent, f.watchBuffer), stopCh: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, sdk.ErrClosed
	}
	if fromNow {
		after = max(after, f.rev)
	}
	if after < f.hist.compacted {
		return nil, fmt.Errorf("%w: watch from revision %d, oldest retained on this node is %d", sdk.ErrCompacted, after, f.hist.compacted)
	}
	w.after = after
	w.backlog = f.hist.since(after, prefix)
	f.watchers[w] = struct{}{}
	return w, nil
}

// Recv implements sdk.WatchStream.
func (w *watcher) Recv() (*sdk.WatchEvent, error) {
	select {
	case <-w.stopCh:
		return nil, w.stopErr
	default:
	}
	if len(w.backlog) > 0 {
		ev := w.backlog[0]
		w.backlog[0] = nil
		w.backlog = w.backlog[1:]
		return cloneEvent(ev), nil
	}
	select {
	case ev, ok := <-w.ch:
		if !ok {
			return nil, w.err
		}
		return cloneEvent(ev), nil
	case <-w.stopCh:
		return nil, w.stopErr
	}
}

// Close implements sdk.WatchStream.
func (w *watcher) Close() error {
	w.stop(sdk.ErrClosed)
	w.stopCtx()
	return nil
}

func (w *watcher) stop(err error) {
	w.stopOnce.Do(func() {
		w.stopErr = err
		close(w.stopCh)
		w.f.mu.Lock()
		if _, ok := w.f.watchers[w]; ok {
			w.f.endWatchLocked(w, err)
		}
		w.f.mu.Unlock()
	})
}

func (f *fsm) endWatchLocked(w *watcher, err error) {
	delete(f.watchers, w)
	w.err = err
	close(w.ch)
}

// publishLocked records a write's events and hands them to the watchers.
func (f *fsm) publishLocked(events []*sdk.WatchEvent) {
	for _, ev := range events {
		f.hist.add(ev)
	}
	for w := range f.watchers {
		for _, ev := range events {
			if ev.Revision <= w.after || !strings.HasPrefix(ev.Key, w.prefix) {
				continue
			}
			select {
			case w.ch <- ev:
				continue
			default:
			}
			f.log.Warn("raft: watcher fell behind; ending its stream", "prefix", w.prefix, "buffer", cap(w.ch))
			f.endWatchLocked(w, fmt.Errorf("%w: more than %d events behind", sdk.ErrWatchOverflow, cap(w.ch)))
			break
		}
	}
}

// closeWatches ends every watch with sdk.ErrClosed and refuses new ones.
func (f *fsm) closeWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for w := range f.watchers {
		f.endWatchLocked(w, sdk.ErrClosed)
	}
}

// compactHistory drops this node's history at and below rev, which the
// caller checked is at most the store revision. rev may be ahead of this
// node's log: events up to rev are then not kept when applied.
func (f *fsm) compactHistory(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hist.compact(rev)
}

// startWatch finishes Watch: ctx's end stops the stream.
func startWatch(ctx context.Context, w *watcher) sdk.WatchStream {
	w.stopCtx = context.AfterFunc(ctx, func() { w.stop(ctx.Err()) })
	return w
}

func cloneEvent(ev *sdk.WatchEvent) *sdk.WatchEvent {
	c := *ev
	c.Value = slices.Clone(ev.Value)
	return &c
}
