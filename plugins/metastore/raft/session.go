package raft

import (
	"context"
	"fmt"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/vltava/vltava/plugins/sdk"
)

// quorumWarnEvery spaces the "waiting for a quorum" log lines; the first
// comes after three election timeouts without a leader.
const quorumWarnEvery = 10 * time.Second

// sessionTable holds the leader's session deadlines. Deadlines are not
// replicated: only the leader judges expiry, by its own clock, and
// replicates the verdict as an expire entry. The table belongs to one
// leadership term; in a new term it starts empty and each live session's
// deadline starts from when this node applied its grant or latest
// keep-alive entry (or, if it never did, from the moment the new leader
// first sees it). Every keep-alive is committed before any leader counts
// it, and this node applied it after it was committed, so its deadline is
// never earlier than the one the previous leader kept: a leader change
// never expires sessions whose owners keep alive, and a session whose
// owner died expires one TTL after its last keep-alive, not one TTL
// after the new leader took over.
type sessionTable struct {
	mu        sync.Mutex
	term      uint64 // term the deadlines belong to; 0 = not leading
	deadlines map[sdk.SessionID]*deadline
}

type deadline struct {
	at       time.Time
	expiring bool // an expire entry is in flight
}

// syncLocked starts a fresh table when the term changed.
func (t *sessionTable) syncLocked(term uint64) {
	if t.term != term || t.deadlines == nil {
		t.term = term
		t.deadlines = make(map[sdk.SessionID]*deadline)
	}
}

// deadLocked reports whether the leader has judged the session dead.
func (t *sessionTable) deadLocked(id sdk.SessionID, now time.Time) bool {
	d := t.deadlines[id]
	return d != nil && (d.expiring || !now.Before(d.at))
}

// precheck fails a write naming a session the leader judged dead but
// whose expire entry has not been applied yet.
func (t *sessionTable) precheck(c *command, term uint64) error {
	var ids []sdk.SessionID
	switch c.typ {
	case cmdWrite:
		for _, op := range c.ops {
			if op.kind == opPut && op.session != sdk.NoSession {
				ids = append(ids, op.session)
			}
		}
	case cmdRevoke, cmdKeepAlive:
		ids = append(ids, c.session)
	}
	if len(ids) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.syncLocked(term)
	now := time.Now()
	for _, id := range ids {
		if t.deadLocked(id, now) {
			return fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, id)
		}
	}
	return nil
}

// granted starts a new session's TTL.
func (t *sessionTable) granted(id sdk.SessionID, ttl time.Duration, term uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.syncLocked(term)
	t.deadlines[id] = &deadline{at: time.Now().Add(ttl)}
}

// keepAlive restarts a live session's TTL.
func (t *sessionTable) keepAlive(id sdk.SessionID, ttl time.Duration, term uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.syncLocked(term)
	now := time.Now()
	if t.deadLocked(id, now) {
		return fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, id)
	}
	t.deadlines[id] = &deadline{at: now.Add(ttl)}
	return nil
}

// scan reconciles the table with the replicated sessions (live) and
// returns the sessions past their deadline, marked as expiring. fresh
// reports that the table was started anew for this term.
func (t *sessionTable) scan(term uint64, live map[sdk.SessionID]liveSession, now time.Time) (expired []sdk.SessionID, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh = t.term != term
	t.syncLocked(term)
	for id := range t.deadlines {
		if _, ok := live[id]; !ok {
			delete(t.deadlines, id)
		}
	}
	for id, ls := range live {
		d := t.deadlines[id]
		switch {
		case d == nil && !ls.seen.IsZero():
			t.deadlines[id] = &deadline{at: ls.seen.Add(ls.ttl)}
		case d == nil:
			t.deadlines[id] = &deadline{at: now.Add(ls.ttl)}
		case !d.expiring && !now.Before(d.at):
			d.expiring = true
			expired = append(expired, id)
		}
	}
	return expired, fresh
}

// unmark lets the next scan retry an expiry whose entry failed.
func (t *sessionTable) unmark(id sdk.SessionID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.deadlines[id]; d != nil {
		d.expiring = false
	}
}

// clear forgets every deadline: this node does not lead.
func (t *sessionTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.term, t.deadlines = 0, nil
}

// GrantSession implements sdk.MetadataStore. The session's ID is the raft
// index of its grant entry.
func (s *Store) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("%w: session TTL %v", sdk.ErrInvalidArgument, req.TTL)
	}
	res, err := s.propose(ctx, &command{typ: cmdGrant, ttl: req.TTL})
	if err != nil {
		return nil, err
	}
	return &sdk.GrantSessionResponse{ID: res.session, TTL: req.TTL}, nil
}

// KeepAlive implements sdk.MetadataStore. Keep-alives go to the leader,
// which commits a keep-alive entry (so every node knows when the session
// was last renewed, see doc.go) and then restarts the session's deadline.
func (s *Store) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.enter() {
		return nil, sdk.ErrClosed
	}
	defer s.exit()
	var ttl time.Duration
	err := s.onLeader(ctx, func() error {
		var err error
		ttl, err = s.localKeepAlive(req.ID)
		return err
	}, func(ctx context.Context, addr string) error {
		r, err := s.forward(ctx, addr, pathKeepAlive, &fwdRequest{Session: req.ID})
		if err == nil {
			ttl = r.TTL
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &sdk.KeepAliveResponse{TTL: ttl}, nil
}

// localKeepAlive runs on the leader: the keep-alive entry is committed
// (it fails if the session ended or the leader judged it dead), then the
// deadline restarts from now.
func (s *Store) localKeepAlive(id sdk.SessionID) (time.Duration, error) {
	term := s.raft.CurrentTerm()
	if err := s.ensureApplied(term); err != nil {
		return 0, err
	}
	if _, err := s.localPropose(&command{typ: cmdKeepAlive, session: id}); err != nil {
		return 0, err
	}
	ttl, ok := s.fsm.sessionTTL(id)
	if !ok {
		return 0, fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, id)
	}
	if err := s.sessions.keepAlive(id, ttl, term); err != nil {
		return 0, err
	}
	return ttl, nil
}

// RevokeSession implements sdk.MetadataStore.
func (s *Store) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &command{typ: cmdRevoke, session: req.ID}); err != nil {
		return nil, err
	}
	return &sdk.RevokeSessionResponse{}, nil
}

// monitor is the Store's background loop, owned by Open/Close: it logs
// quorum and leadership changes and, on the leader, expires sessions.
func (s *Store) monitor() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.ReapInterval)
	defer tick.Stop()
	var (
		lastLeader hraft.ServerID
		leaderless = time.Now()
		lastWarn   time.Time
		warnAfter  = 3 * s.electionTimeout()
	)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		addr, id := s.raft.LeaderWithID()
		switch {
		case addr == "":
			if lastLeader != "" {
				leaderless, lastLeader = now, ""
			}
			if now.Sub(leaderless) >= warnAfter && now.Sub(lastWarn) >= quorumWarnEvery {
				s.log.Warn("raft: waiting for a quorum of voters; no leader yet",
					"voters", FormatVoters(s.cfg.Voters), "waited", now.Sub(leaderless).Round(time.Millisecond))
				lastWarn = now
			}
		case id != lastLeader:
			s.log.Info("raft: leader elected", "leader", string(id), "address", string(addr), "term", s.raft.CurrentTerm())
			lastLeader = id
		}
		s.reap()
	}
}

// reap expires the sessions past their deadline, if this node leads.
func (s *Store) reap() {
	if s.raft.State() != hraft.Leader {
		s.sessions.clear()
		return
	}
	term := s.raft.CurrentTerm()
	if err := s.ensureApplied(term); err != nil {
		return // not leading after all, or shutting down: next tick decides
	}
	live := s.fsm.sessionTTLs()
	expired, fresh := s.sessions.scan(term, live, time.Now())
	if fresh && len(live) > 0 {
		s.log.Info("raft: leading a new term; session deadlines run from their last keep-alive seen here", "term", term, "sessions", len(live))
	}
	for _, id := range expired {
		res, err := s.localPropose(&command{typ: cmdExpire, session: id})
		if err != nil {
			s.sessions.unmark(id)
			s.log.Warn("raft: session expiry failed; will retry", "session", int64(id), "err", err)
			continue
		}
		s.log.Info("raft: session expired", "session", int64(id), "revision", res.rev)
	}
}

func (s *Store) electionTimeout() time.Duration {
	if s.cfg.ElectionTimeout > 0 {
		return s.cfg.ElectionTimeout
	}
	return hraft.DefaultConfig().ElectionTimeout
}
