// Package watchhub provides the watch machinery the metadata stores
// share: a bounded history of recent events, so a watch can start from a
// past revision (or fail with sdk.ErrCompacted), and a fan-out of each
// write's events to per-watcher buffered channels, where a watcher whose
// buffer is full is ended with sdk.ErrWatchOverflow instead of blocking
// the writer. The buffer counts writes, not events: one write of many
// keys (a topic with 10,000 partitions is one Txn) takes one place, so a
// large write never ends a watcher that keeps up.
//
// Threading contract: a Hub has no lock of its own. It is guarded by the
// owning store's mutex, passed to New, which is also the lock that orders
// the store's writes; methods ending in Locked must be called with it
// held, so a write's events reach exactly the watchers registered before
// it. A Stream's Recv is called by one goroutine at a time; its Close, and
// the end of the context given to Stream.Attach, may come from any
// goroutine and take the owner's mutex themselves, so neither may be
// called with it held.
package watchhub

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/vltava/vltava/plugins/sdk"
)

// Config sizes a Hub.
type Config struct {
	// Name prefixes the hub's log lines ("local", "raft").
	Name string
	// History is how many recent events are kept for catch-up (> 0).
	History int
	// HistoryBytes caps the value bytes kept in the history; 0 means no
	// byte bound.
	HistoryBytes int
	// Buffer is how many live writes a watcher may lag before it is ended
	// with sdk.ErrWatchOverflow (each write's events count once).
	Buffer int
	// Scope, if set, names where the history lives in sdk.ErrCompacted
	// messages ("on this node").
	Scope string
	// Logger receives the overflow warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Hub is the set of live watchers and the event history of one store.
type Hub struct {
	mu       sync.Locker // the owner's mutex; guards everything below
	cfg      Config
	log      *slog.Logger
	hist     history
	watchers map[*Stream]struct{}
	closed   bool // no new watchers after CloseLocked
}

// New returns a Hub guarded by mu, the owner's mutex.
func New(mu sync.Locker, cfg Config) *Hub {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Hub{
		mu:       mu,
		cfg:      cfg,
		log:      log,
		hist:     newHistory(cfg.History, cfg.HistoryBytes),
		watchers: make(map[*Stream]struct{}),
	}
}

// OpenLocked registers a stream of the events above revision after whose
// key has prefix: first the ones still in the history, then live ones.
// It fails with sdk.ErrClosed after CloseLocked and with sdk.ErrCompacted
// if events above after are no longer all in the history. The caller
// must call Attach on the stream once it has released the mutex.
func (h *Hub) OpenLocked(prefix string, after int64) (*Stream, error) {
	if h.closed {
		return nil, sdk.ErrClosed
	}
	if after < h.hist.compacted {
		scope := ""
		if h.cfg.Scope != "" {
			scope = " " + h.cfg.Scope
		}
		return nil, fmt.Errorf("%w: watch from revision %d, oldest retained%s is %d", sdk.ErrCompacted, after, scope, h.hist.compacted)
	}
	w := &Stream{
		h:       h,
		prefix:  prefix,
		after:   after,
		backlog: h.hist.since(after, prefix),
		ch:      make(chan []*sdk.WatchEvent, h.cfg.Buffer),
		stopCh:  make(chan struct{}),
	}
	h.watchers[w] = struct{}{}
	return w, nil
}

// PublishLocked records one write's events in the history and hands
// them to the watchers. The events are shared with every watcher and
// must not be modified afterwards.
func (h *Hub) PublishLocked(events []*sdk.WatchEvent) {
	for _, ev := range events {
		h.hist.add(ev)
	}
	for w := range h.watchers {
		mine := events // shared when every event is for w
		if slices.ContainsFunc(events, func(ev *sdk.WatchEvent) bool { return !w.wants(ev) }) {
			mine = nil
			for _, ev := range events {
				if w.wants(ev) {
					mine = append(mine, ev)
				}
			}
		}
		if len(mine) == 0 {
			continue
		}
		select {
		case w.ch <- mine:
			continue
		default:
		}
		h.log.Warn(h.cfg.Name+": watcher fell behind; ending its stream", "prefix", w.prefix, "buffer", cap(w.ch))
		h.endLocked(w, fmt.Errorf("%w: more than %d writes behind", sdk.ErrWatchOverflow, cap(w.ch)))
	}
}

// wants reports whether ev is for w: above its start and under its prefix.
func (w *Stream) wants(ev *sdk.WatchEvent) bool {
	return ev.Revision > w.after && strings.HasPrefix(ev.Key, w.prefix)
}

// CompactLocked drops the history at and below rev. rev may be ahead of
// the events published so far: events up to rev are then not kept.
func (h *Hub) CompactLocked(rev int64) { h.hist.compact(rev) }

// ResetLocked empties the history, which now starts above rev (a state
// restore), and ends with reason every watcher that still needed events
// at or below rev.
func (h *Hub) ResetLocked(rev int64, reason error) {
	h.hist.reset(rev)
	for w := range h.watchers {
		if w.after < rev {
			h.endLocked(w, reason)
		}
	}
}

// CloseLocked ends every watcher with sdk.ErrClosed and refuses new ones.
func (h *Hub) CloseLocked() {
	h.closed = true
	for w := range h.watchers {
		h.endLocked(w, sdk.ErrClosed)
	}
}

// endLocked removes w and closes its channel; Recv returns err once the
// buffered events are drained.
func (h *Hub) endLocked(w *Stream, err error) {
	delete(h.watchers, w)
	w.err = err
	close(w.ch)
}
