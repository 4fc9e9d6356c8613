package watchhub

import (
	"bytes"
	"context"
	"sync"

	"github.com/vltava/vltava/plugins/sdk"
)

// Stream is one watch: an sdk.WatchStream fed by its Hub.
//
// Live events go on ch without blocking, one element per write; when ch
// is full the hub ends the stream with sdk.ErrWatchOverflow, so a slow
// watcher never blocks writers and holds at most Config.Buffer writes.
type Stream struct {
	h      *Hub
	prefix string
	after  int64 // deliver only revisions above this

	// backlog holds the catch-up events from history; only Recv touches it.
	backlog []*sdk.WatchEvent
	// rest is what Recv has not returned yet of the live write it took
	// last. The slice is shared with the hub and other watchers: it is
	// only resliced, never written.
	rest []*sdk.WatchEvent

	// ch carries live writes' events (shared, never modified). Only the hub sends on it and closes it,
	// under the owner's mutex, after setting err. INVARIANT: ch is closed
	// exactly when the stream has left h.watchers.
	ch  chan []*sdk.WatchEvent
	err error

	stopOnce sync.Once
	stopCh   chan struct{} // closed by Close or when ctx ends
	stopErr  error         // set before stopCh is closed
	stopCtx  func() bool   // deregisters the ctx callback; set once by Attach
}

var _ sdk.WatchStream = (*Stream)(nil)

// Attach ends the stream with ctx's error when ctx ends and returns the
// stream. Call it exactly once, after OpenLocked, without the owner's
// mutex held (an ended ctx stops the stream at once).
func (w *Stream) Attach(ctx context.Context) *Stream {
	w.stopCtx = context.AfterFunc(ctx, func() { w.stop(ctx.Err()) })
	return w
}

// Recv implements sdk.WatchStream. Each event returned is the caller's
// own copy.
func (w *Stream) Recv() (*sdk.WatchEvent, error) {
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
	if len(w.rest) > 0 {
		ev := w.rest[0]
		w.rest = w.rest[1:]
		return cloneEvent(ev), nil
	}
	select {
	case evs, ok := <-w.ch:
		if !ok {
			return nil, w.err
		}
		w.rest = evs[1:] // evs is never empty: the hub sends none
		return cloneEvent(evs[0]), nil
	case <-w.stopCh:
		return nil, w.stopErr
	}
}

// Close implements sdk.WatchStream.
func (w *Stream) Close() error {
	w.stop(sdk.ErrClosed)
	// The ctx callback never touches stopCtx, and Close runs after Attach
	// returned, so reading it here is race-free.
	w.stopCtx()
	return nil
}

// stop ends the stream from the watcher's side.
func (w *Stream) stop(err error) {
	w.stopOnce.Do(func() {
		w.stopErr = err
		close(w.stopCh)
		w.h.mu.Lock()
		if _, ok := w.h.watchers[w]; ok {
			w.h.endLocked(w, err)
		}
		w.h.mu.Unlock()
	})
}

func cloneEvent(ev *sdk.WatchEvent) *sdk.WatchEvent {
	c := *ev
	c.Value = bytes.Clone(ev.Value)
	return &c
}
