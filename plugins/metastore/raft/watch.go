package raft

import "github.com/vltava/vltava/plugins/metastore/internal/watchhub"

// Watch streams, the per-node event history (filled by Apply) and the
// fan-out live in f.watches (package watchhub), guarded by f.mu, so a slow
// watcher never stalls the state machine.

// watch registers a watcher for changes above after. With fromNow, after
// is raised to this node's revision if that is higher (changes between
// the two are concurrent with the Watch call, so skipping them is allowed).
func (f *fsm) watch(prefix string, after int64, fromNow bool) (*watchhub.Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fromNow {
		after = max(after, f.rev)
	}
	return f.watches.OpenLocked(prefix, after)
}

// closeWatches ends every watch with sdk.ErrClosed and refuses new ones.
func (f *fsm) closeWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches.CloseLocked()
}

// compactHistory drops this node's history at and below rev, which the
// caller checked is at most the store revision. rev may be ahead of this
// node's log: events up to rev are then not kept when applied.
func (f *fsm) compactHistory(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches.CompactLocked(rev)
}
