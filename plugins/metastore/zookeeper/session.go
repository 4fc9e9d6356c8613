package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/vltava/vltava/plugins/sdk"
)

// localSession is a session this store granted: its TTL is judged here,
// and its live znode is an ephemeral of this store's ZooKeeper session.
type localSession struct {
	ttl      time.Duration
	deadline time.Time
}

// GrantSession creates the session's live znode (ephemeral, sequential:
// the sequence number names the session) and its index znode.
func (s *Store) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	if req.TTL <= 0 {
		return nil, fmt.Errorf("zookeeper store: session TTL %v: %w", req.TTL, sdk.ErrInvalidArgument)
	}
	ttl := max(req.TTL, s.cfg.SessionTimeout)
	var id sdk.SessionID
	err := s.run(ctx, "grant session", func(context.Context) error {
		p, err := s.conn.Create(s.p.live+"/s-", nil, zk.FlagEphemeral|zk.FlagSequence, s.acl)
		if err != nil {
			return err
		}
		var ok bool
		if id, ok = sessionFromLive(path.Base(p)); !ok {
			return fmt.Errorf("%w: live znode %s", errCorrupt, p)
		}
		if _, err := s.conn.Create(s.p.session(id), nil, 0, s.acl); err != nil {
			s.conn.Delete(p, -1)
			return err
		}
		s.mu.Lock()
		s.sessions[id] = &localSession{ttl: ttl, deadline: time.Now().Add(ttl)}
		s.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sdk.GrantSessionResponse{ID: id, TTL: ttl}, nil
}

// KeepAlive restarts a local session's TTL after a round trip that finds
// the session's live znode: the reply proves ZooKeeper heard from this
// client's session just now, and a session ZooKeeper expired (the client
// may not have noticed yet) is reported as ErrSessionExpired. Without a
// reply it fails with ErrUnavailable. A session this instance did not
// grant cannot be renewed here: its liveness is the ZooKeeper session of
// the instance that granted it (after a plugin restart, that instance is
// gone and the session ends with its ZooKeeper session), so KeepAlive
// reports ErrSessionExpired and the caller registers again.
func (s *Store) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	s.mu.Lock()
	ls, ended := s.sessions[req.ID], s.ended[req.ID] || s.ending[req.ID]
	closed := s.isClosed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, errClosed
	case ls == nil && ended:
		return nil, fmt.Errorf("zookeeper store: session %d: %w", req.ID, sdk.ErrSessionExpired)
	case ls == nil:
		return nil, fmt.Errorf("zookeeper store: session %d was not granted by this store instance; it ends with its owner's ZooKeeper session: %w", req.ID, sdk.ErrSessionExpired)
	}
	err := s.run(ctx, "keep alive", func(context.Context) error {
		ok, _, err := s.conn.Exists(s.p.liveNode(req.ID))
		if err == nil && !ok {
			err = fmt.Errorf("zookeeper store: session %d: its live znode is gone: %w", req.ID, sdk.ErrSessionExpired)
		}
		return err
	})
	if errors.Is(err, sdk.ErrSessionExpired) {
		s.forget(req.ID)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[req.ID] != ls { // ended meanwhile (expiry loop, ZooKeeper session expiry)
		return nil, fmt.Errorf("zookeeper store: session %d: %w", req.ID, sdk.ErrSessionExpired)
	}
	ls.deadline = time.Now().Add(ls.ttl)
	return &sdk.KeepAliveResponse{TTL: ls.ttl}, nil
}

// RevokeSession deletes the live znode, then the session's keys.
func (s *Store) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	err := s.run(ctx, "revoke session", func(ctx context.Context) error {
		err := s.conn.Delete(s.p.liveNode(req.ID), -1)
		if errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zookeeper store: session %d: %w", req.ID, sdk.ErrSessionExpired)
		}
		if err != nil {
			return err
		}
		s.forget(req.ID)
		return s.reap(ctx, req.ID)
	})
	if err != nil {
		return nil, err
	}
	return &sdk.RevokeSessionResponse{}, nil
}

// forget drops a local session: later keep-alives fail.
func (s *Store) forget(id sdk.SessionID) {
	s.mu.Lock()
	delete(s.sessions, id)
	delete(s.ending, id)
	s.ended[id] = true
	s.mu.Unlock()
}

// reap ends a session whose live znode is gone: one write deletes its
// keys (listed under sessions/<id>) and its index znode. A session
// without keys ends without consuming a revision. Ending an already
// ended session is a no-op.
func (s *Store) reap(ctx context.Context, id sdk.SessionID) error {
	if _, err := s.conn.Sync(s.p.root); err != nil {
		return err
	}
	errGone := errors.New("session index gone")
	var keys []string
	list := func() ([]string, error) {
		names, _, err := s.conn.Children(s.p.session(id))
		if errors.Is(err, zk.ErrNoNode) {
			return nil, errGone
		}
		if err != nil {
			return nil, err
		}
		keys = keys[:0]
		for _, n := range names {
			k, err := decodeName(n)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
		return keys, nil
	}
	_, err := s.writeKeys(ctx, list, func(view map[string]keyState, rev int64) ([]zop, []sdk.WatchEvent, error) {
		var ops []zop
		var evs []sdk.WatchEvent
		for _, k := range keys {
			st := view[k]
			if st.exists && st.rec.session == id {
				o, ev := s.deleteOps(st, k, rev)
				ops, evs = append(ops, o...), append(evs, ev)
			} else {
				ops = append(ops, zop{req: &zk.DeleteRequest{Path: s.p.owned(id, k), Version: -1}})
			}
		}
		// The index znode goes last; a session without keys ends
		// without a revision (write adds no rev or log op then).
		ops = append(ops, zop{req: &zk.DeleteRequest{Path: s.p.session(id), Version: -1}, sessionCheck: true})
		return ops, evs, nil
	})
	if errors.Is(err, errGone) || errors.Is(err, sdk.ErrSessionExpired) {
		return nil // ended by someone else
	}
	return err
}

// expiryLoop ends local sessions whose TTL passed without a keep-alive.
func (s *Store) expiryLoop() {
	defer s.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
		}
		now := time.Now()
		var due []sdk.SessionID
		s.mu.Lock()
		for id, ls := range s.sessions {
			if !s.disconnected && now.After(ls.deadline) {
				delete(s.sessions, id)
				s.ending[id] = true
			}
		}
		for id := range s.ending {
			due = append(due, id)
		}
		s.mu.Unlock()
		for _, id := range due {
			err := s.run(context.Background(), "end session", func(ctx context.Context) error {
				if err := s.conn.Delete(s.p.liveNode(id), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return err
				}
				return s.reap(ctx, id)
			})
			if err != nil {
				if !errors.Is(err, sdk.ErrClosed) {
					s.logger.Warn("zookeeper store: ending an expired session failed; retrying", "session", id, "err", err)
				}
				continue
			}
			s.forget(id)
		}
	}
}

// orphanLoop ends sessions whose live znode ZooKeeper deleted (the store
// instance that granted them lost its ZooKeeper session: crashed,
// partitioned or closed). It lists the index before the live znodes: a
// session created in between is absent from the index listing, never
// mistaken for an orphan.
func (s *Store) orphanLoop() {
	defer s.wg.Done()
	for {
		wait, err := s.reapOrphans()
		if err != nil {
			wait = nil
			select {
			case <-s.closed:
			default:
				s.logger.Debug("zookeeper store: orphan scan", "err", err)
			}
		}
		select {
		case <-s.closed:
			return
		case <-wait:
		case <-time.After(5 * time.Second):
		}
	}
}

func (s *Store) reapOrphans() (<-chan zk.Event, error) {
	index, _, err := s.conn.Children(s.p.sessions)
	if err != nil {
		return nil, err
	}
	live, _, wait, err := s.conn.ChildrenW(s.p.live)
	if err != nil {
		return nil, err
	}
	alive := make(map[string]bool, len(live))
	for _, n := range live {
		alive[n] = true
	}
	for _, n := range index {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			continue
		}
		id := sdk.SessionID(v)
		if alive[liveName(id)] {
			continue
		}
		err = s.run(context.Background(), "end orphaned session", func(ctx context.Context) error { return s.reap(ctx, id) })
		if err != nil {
			return wait, err
		}
		s.logger.Info("zookeeper store: ended a session whose ZooKeeper session expired", "session", id)
	}
	return wait, nil
}
