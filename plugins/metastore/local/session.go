package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// retryEnd is how long the reaper waits before retrying a session end
// whose write failed.
const retryEnd = time.Second

// session is a live session. Sessions exist only in memory.
type session struct {
	ttl      time.Duration
	deadline time.Time           // the session is dead from this instant on
	keys     map[string]struct{} // keys it owns
}

// GrantSession implements sdk.MetadataStore.
func (s *Store) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("%w: session TTL %v", sdk.ErrInvalidArgument, req.TTL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, sdk.ErrClosed
	}
	id := sdk.SessionID(rand.Int64N(1<<62) + 1)
	for s.sessions[id] != nil {
		id = sdk.SessionID(rand.Int64N(1<<62) + 1)
	}
	s.sessions[id] = &session{ttl: req.TTL, deadline: time.Now().Add(req.TTL), keys: make(map[string]struct{})}
	select {
	case s.wakeCh <- struct{}{}:
	default: // a wake-up is already pending
	}
	return &sdk.GrantSessionResponse{ID: id, TTL: req.TTL}, nil
}

// KeepAlive implements sdk.MetadataStore.
func (s *Store) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, sdk.ErrClosed
	}
	now := time.Now()
	sess := s.liveSessionLocked(req.ID, now)
	if sess == nil {
		return nil, fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, req.ID)
	}
	sess.deadline = now.Add(sess.ttl) // only moves later: no need to wake the reaper
	return &sdk.KeepAliveResponse{TTL: sess.ttl}, nil
}

// RevokeSession implements sdk.MetadataStore.
func (s *Store) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, sdk.ErrClosed
	}
	if s.liveSessionLocked(req.ID, time.Now()) == nil {
		return nil, fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, req.ID)
	}
	if err := s.endSessionLocked(req.ID); err != nil {
		return nil, err
	}
	return &sdk.RevokeSessionResponse{}, nil
}

// liveSessionLocked returns the session if it exists and has not passed
// its deadline (whether or not the reaper has run yet).
func (s *Store) liveSessionLocked(id sdk.SessionID, now time.Time) *session {
	sess := s.sessions[id]
	if sess == nil || !now.Before(sess.deadline) {
		return nil
	}
	return sess
}

// endSessionLocked deletes the session's keys in one write and forgets
// it. If the write fails, the session stays (dead: its deadline is past)
// so the reaper retries.
func (s *Store) endSessionLocked(id sdk.SessionID) error {
	sess := s.sessions[id]
	if sess == nil {
		return nil
	}
	keys := make([]string, 0, len(sess.keys))
	for k := range sess.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	muts := make([]mutation, len(keys))
	for i, k := range keys {
		muts[i] = mutation{del: true, key: k, onlySession: id}
	}
	if _, err := s.applyLocked(nil, muts); err != nil {
		sess.deadline = time.Now().Add(-time.Nanosecond)
		return fmt.Errorf("local: end session %d: %w", id, err)
	}
	delete(s.sessions, id)
	return nil
}

// moveKeyLocked updates the session index after a write moved key from
// session from to session to (NoSession for persistent or deleted).
func (s *Store) moveKeyLocked(key string, from, to sdk.SessionID) {
	if sess := s.sessions[from]; sess != nil {
		delete(sess.keys, key)
	}
	if sess := s.sessions[to]; sess != nil {
		sess.keys[key] = struct{}{}
	}
}

// reap ends sessions past their deadline until Close. Owned by the Store:
// started by Open, stopped and awaited by Close.
func (s *Store) reap() {
	defer close(s.reaperDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(s.reapOnce(time.Now()))
		select {
		case <-s.stopCh:
			return
		case <-s.wakeCh:
		case <-timer.C:
		}
	}
}

// reapOnce ends every session dead at now and returns how long to sleep
// until the next deadline.
func (s *Store) reapOnce(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := time.Hour
	if s.closed.Load() {
		return next
	}
	for id, sess := range s.sessions {
		if now.Before(sess.deadline) {
			next = min(next, sess.deadline.Sub(now))
			continue
		}
		owned := len(sess.keys)
		if err := s.endSessionLocked(id); err != nil {
			s.log.Error("local: session expiry failed; will retry", "session", int64(id), "err", err)
			next = min(next, retryEnd)
			continue
		}
		s.log.Debug("local: session expired", "session", int64(id), "keys", owned)
	}
	return next
}
