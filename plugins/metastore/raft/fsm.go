package raft

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	iradix "github.com/hashicorp/go-immutable-radix"
	hraft "github.com/hashicorp/raft"

	"github.com/vltava/vltava/plugins/metastore/internal/watchhub"
	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
	"github.com/vltava/vltava/plugins/sdk"
)

// kvEntry is one key's stored state. Entries are immutable once in the
// tree: a write inserts a new entry, so snapshots can share them.
type kvEntry struct {
	value   []byte
	version int64
	session sdk.SessionID
}

// session is a live session as replicated: its TTL and the keys it owns.
// Deadlines are not replicated; the leader keeps them (see sessionTable).
type session struct {
	ttl  time.Duration
	keys map[string]struct{}
}

// applyResult is what fsm.Apply returns for a command entry; raft hands it
// to the proposer through ApplyFuture.Response.
type applyResult struct {
	rev     int64         // revision of the write, or the current one if nothing changed
	session sdk.SessionID // cmdGrant: the new session's ID
	err     error         // a failed condition etc.; nothing was changed
}

// fsm is the replicated state machine: the key space, the store revision
// and the sessions, changed only by Apply and Restore, which raft calls
// in log order on every node. Apply depends on nothing but the entry and
// the state: no clocks, no randomness, no map iteration order.
//
// INVARIANT: every entry in tree has version <= rev; a session's keys set
// holds exactly the keys whose entry names that session.
type fsm struct {
	log *slog.Logger

	mu       sync.Mutex
	tree     *iradix.Tree // key → *kvEntry
	rev      int64
	index    uint64 // raft index of the last applied command entry
	sessions map[sdk.SessionID]*session

	// seen is local, not replicated: when this node applied each live
	// session's grant or latest keep-alive entry, by its own clock. Apply
	// results never depend on it; a new leader starts deadlines from it
	// (see sessionTable.scan). Empty after a restart or a restore: the
	// sessions then get a full TTL from the moment a leader first sees
	// them.
	seen map[sdk.SessionID]time.Time

	// Watch state lives here so a change's events reach exactly the
	// watchers registered before it (see watch.go).
	watches *watchhub.Hub // guarded by mu
}

func newFSM(log *slog.Logger, historyLen, watchBuffer int) *fsm {
	f := &fsm{
		log:      log,
		tree:     iradix.New(),
		sessions: make(map[sdk.SessionID]*session),
		seen:     make(map[sdk.SessionID]time.Time),
	}
	f.watches = watchhub.New(&f.mu, watchhub.Config{Name: "raft", History: historyLen,
		Buffer: watchBuffer, Scope: "on this node", Logger: log})
	return f
}

var _ hraft.FSM = (*fsm)(nil)

// Apply implements raft.FSM.
func (f *fsm) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand {
		return nil
	}
	c, err := decodeCommand(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index = l.Index
	if err != nil {
		// Every node rejects the same bytes the same way: no divergence.
		f.log.Error("raft: skipping a malformed log entry", "index", l.Index, "err", err)
		return applyResult{rev: f.rev, err: err}
	}
	switch c.typ {
	case cmdWrite:
		return f.applyWriteLocked(c.conds, c.ops)
	case cmdGrant:
		// The entry's log index is unique and the same on every node.
		id := sdk.SessionID(l.Index)
		f.sessions[id] = &session{ttl: c.ttl, keys: make(map[string]struct{})}
		f.seen[id] = time.Now()
		return applyResult{rev: f.rev, session: id}
	case cmdKeepAlive:
		if f.sessions[c.session] == nil {
			return applyResult{rev: f.rev, err: fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, c.session)}
		}
		f.seen[c.session] = time.Now()
		return applyResult{rev: f.rev}
	case cmdRevoke:
		if f.sessions[c.session] == nil {
			return applyResult{rev: f.rev, err: fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, c.session)}
		}
		return applyResult{rev: f.endSessionLocked(c.session)}
	default: // cmdExpire
		if f.sessions[c.session] == nil {
			return applyResult{rev: f.rev}
		}
		return applyResult{rev: f.endSessionLocked(c.session)}
	}
}

func (f *fsm) getLocked(key string) *kvEntry {
	v, ok := f.tree.Get([]byte(key))
	if !ok {
		return nil
	}
	return v.(*kvEntry)
}

func versionOf(e *kvEntry) int64 {
	if e == nil {
		return 0
	}
	return e.version
}

// applyWriteLocked checks every condition and precondition, then applies
// all ops at one new revision, or changes nothing.
func (f *fsm) applyWriteLocked(conds []sdk.Condition, ops []wop) applyResult {
	err := writecheck.CheckConditions(conds, func(key string) (int64, error) {
		return versionOf(f.getLocked(key)), nil
	})
	if err != nil {
		return applyResult{rev: f.rev, err: err}
	}
	for _, op := range ops {
		if op.kind == opPut && op.session != sdk.NoSession && f.sessions[op.session] == nil {
			return applyResult{rev: f.rev, err: fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, op.session)}
		}
		if op.kind == opDeleteMustExist && f.getLocked(op.key) == nil {
			return applyResult{rev: f.rev, err: fmt.Errorf("%w: %q", sdk.ErrNotFound, op.key)}
		}
	}
	rev := f.rev + 1
	txn := f.tree.Txn()
	var events []*sdk.WatchEvent
	for _, op := range ops {
		var old *kvEntry
		if v, ok := txn.Get([]byte(op.key)); ok {
			old = v.(*kvEntry)
		}
		if op.kind == opPut {
			txn.Insert([]byte(op.key), &kvEntry{value: op.value, version: rev, session: op.session})
			f.moveKeyLocked(op.key, old, op.session)
			events = append(events, &sdk.WatchEvent{Type: sdk.EventPut, Key: op.key, Value: op.value,
				Version: rev, Session: op.session, Revision: rev})
			continue
		}
		if old == nil {
			continue
		}
		txn.Delete([]byte(op.key))
		f.moveKeyLocked(op.key, old, sdk.NoSession)
		events = append(events, &sdk.WatchEvent{Type: sdk.EventDelete, Key: op.key, Revision: rev})
	}
	if len(events) == 0 {
		return applyResult{rev: f.rev}
	}
	f.tree = txn.Commit()
	f.rev = rev
	f.watches.PublishLocked(events)
	return applyResult{rev: rev}
}

// moveKeyLocked keeps the session key sets in step with a write.
func (f *fsm) moveKeyLocked(key string, old *kvEntry, to sdk.SessionID) {
	if old != nil {
		if s := f.sessions[old.session]; s != nil {
			delete(s.keys, key)
		}
	}
	if s := f.sessions[to]; s != nil {
		s.keys[key] = struct{}{}
	}
}

// endSessionLocked forgets the session and deletes its keys in one write
// (a revision only if it owned keys). It returns the store revision.
func (f *fsm) endSessionLocked(id sdk.SessionID) int64 {
	sess := f.sessions[id]
	delete(f.sessions, id)
	delete(f.seen, id)
	keys := make([]string, 0, len(sess.keys))
	for k := range sess.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic event order
	ops := make([]wop, len(keys))
	for i, k := range keys {
		ops[i] = wop{kind: opDelete, key: k}
	}
	return f.applyWriteLocked(nil, ops).rev
}

// get returns a copy of key's state and the revision it reflects.
func (f *fsm) get(key string) (sdk.KeyValue, bool, int64) {
	f.mu.Lock()
	e, rev := f.getLocked(key), f.rev
	f.mu.Unlock()
	if e == nil {
		return sdk.KeyValue{}, false, rev
	}
	return sdk.KeyValue{Key: key, Value: slices.Clone(e.value), Version: e.version, Session: e.session}, true, rev
}

// list returns copies of the keys with the prefix, sorted byte-wise.
func (f *fsm) list(prefix string) ([]sdk.KeyValue, int64) {
	f.mu.Lock()
	root, rev := f.tree.Root(), f.rev // immutable: walk it unlocked
	f.mu.Unlock()
	var out []sdk.KeyValue
	root.WalkPrefix([]byte(prefix), func(k []byte, v any) bool {
		e := v.(*kvEntry)
		out = append(out, sdk.KeyValue{Key: string(k), Value: slices.Clone(e.value), Version: e.version, Session: e.session})
		return false
	})
	return out, rev
}

func (f *fsm) revision() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// sessionTTL reports a live (replicated) session's TTL.
func (f *fsm) sessionTTL(id sdk.SessionID) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[id]
	if s == nil {
		return 0, false
	}
	return s.ttl, true
}

// liveSession is what a leader needs to judge a session's expiry.
type liveSession struct {
	ttl  time.Duration
	seen time.Time // zero if this node has not applied its grant or a keep-alive
}

// sessionTTLs copies every live session's TTL and local seen time.
func (f *fsm) sessionTTLs() map[sdk.SessionID]liveSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[sdk.SessionID]liveSession, len(f.sessions))
	for id, s := range f.sessions {
		out[id] = liveSession{ttl: s.ttl, seen: f.seen[id]}
	}
	return out
}

// Snapshot implements raft.FSM. It captures the immutable tree root, so
// Persist runs concurrently with later Applies.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := &fsmSnapshot{tree: f.tree, rev: f.rev, index: f.index}
	for id, s := range f.sessions {
		snap.sessions = append(snap.sessions, sessionRecord{id: id, ttl: s.ttl})
	}
	slices.SortFunc(snap.sessions, func(a, b sessionRecord) int { return cmp.Compare(a.id, b.id) })
	return snap, nil
}

// Restore implements raft.FSM: it replaces the whole state. Watch history
// before the snapshot is gone, so watchers that still needed it end with
// sdk.ErrCompacted.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tree, f.rev, f.index, f.sessions = st.tree, st.rev, st.index, st.sessions
	f.seen = make(map[sdk.SessionID]time.Time)
	f.watches.ResetLocked(st.rev, fmt.Errorf("%w: node restored a snapshot at revision %d", sdk.ErrCompacted, st.rev))
	f.log.Info("raft: restored snapshot", "revision", st.rev, "index", st.index, "sessions", len(st.sessions))
	return nil
}
