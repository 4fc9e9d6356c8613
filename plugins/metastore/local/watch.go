package local

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/vltava/vltava/plugins/sdk"
)

// watcher is one Watch stream.
//
// The store sends live events on ch without blocking; when ch is full the
// store ends the stream with sdk.ErrWatchOverflow instead of waiting, so a
// slow watcher never blocks writers and holds at most WatchBuffer events.
type watcher struct {
	s      *Store
	prefix string
	after  int64 // deliver only revisions above this

	// backlog holds the catch-up events from history; only Recv touches it.
	backlog []*sdk.WatchEvent

	// ch carries live events. Only the store sends on it and closes it,
	// under s.mu, after setting err. INVARIANT: ch is closed exactly when
	// the watcher has left s.watchers.
	ch  chan *sdk.WatchEvent
	err error

	stopOnce sync.Once
	stopCh   chan struct{} // closed by Close or when ctx ends
	stopErr  error         // set before stopCh is closed
	stopCtx  func() bool   // deregisters the ctx callback; set once by Watch
}

// Watch implements sdk.MetadataStore.
func (s *Store) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.FromRevision < 0 {
		return nil, fmt.Errorf("%w: FromRevision %d", sdk.ErrInvalidArgument, req.FromRevision)
	}
	w := &watcher{s: s, prefix: req.Prefix, ch: make(chan *sdk.WatchEvent, s.opts.WatchBuffer), stopCh: make(chan struct{})}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, sdk.ErrClosed
	}
	w.after = req.FromRevision
	if w.after == 0 {
		w.after = s.rev
	}
	if w.after < s.history.compacted {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: watch from revision %d, oldest retained is %d", sdk.ErrCompacted, w.after, s.history.compacted)
	}
	w.backlog = s.history.since(w.after, w.prefix)
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	w.stopCtx = context.AfterFunc(ctx, func() { w.stop(ctx.Err()) })
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
	// The ctx callback never touches stopCtx, and Close runs after Watch
	// returned, so reading it here is race-free.
	w.stopCtx()
	return nil
}

// stop ends the stream from the watcher's side.
func (w *watcher) stop(err error) {
	w.stopOnce.Do(func() {
		w.stopErr = err
		close(w.stopCh)
		w.s.mu.Lock()
		if _, ok := w.s.watchers[w]; ok {
			w.s.endWatchLocked(w, err)
		}
		w.s.mu.Unlock()
	})
}

// endWatchLocked removes w and closes its channel; Recv returns err once
// the buffered events are drained.
func (s *Store) endWatchLocked(w *watcher, err error) {
	delete(s.watchers, w)
	w.err = err
	close(w.ch)
}

// publishLocked records a write's events and hands them to the watchers.
func (s *Store) publishLocked(events []*sdk.WatchEvent) {
	for _, ev := range events {
		s.history.add(ev)
	}
	for w := range s.watchers {
		for _, ev := range events {
			if ev.Revision <= w.after || !hasPrefix(ev.Key, w.prefix) {
				continue
			}
			select {
			case w.ch <- ev:
				continue
			default:
			}
			s.log.Warn("local: watcher fell behind; ending its stream", "prefix", w.prefix, "buffer", cap(w.ch))
			s.endWatchLocked(w, fmt.Errorf("%w: more than %d events behind", sdk.ErrWatchOverflow, cap(w.ch)))
			break
		}
	}
}

func cloneEvent(ev *sdk.WatchEvent) *sdk.WatchEvent {
	c := *ev
	c.Value = bytes.Clone(ev.Value)
	return &c
}
