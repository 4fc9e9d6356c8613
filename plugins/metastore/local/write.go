package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vltava/vltava/plugins/sdk"
)

// mutation is one change inside a write.
type mutation struct {
	del     bool
	key     string
	value   []byte        // put only
	session sdk.SessionID // put: new owner; delete: see onlySession

	// mustExist makes a delete of an absent key fail with ErrNotFound
	// (a plain Delete) instead of being a no-op (a Txn op).
	mustExist bool
	// onlySession, if set, limits a delete to a key still owned by that
	// session (session end).
	onlySession sdk.SessionID
}

// errNoChange rolls back a write transaction that changed nothing, so it
// neither consumes a revision nor pays for a commit.
var errNoChange = errors.New("local: no change")

// Put implements sdk.MetadataStore.
func (s *Store) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	conds, err := s.expect(req.Key, req.ExpectVersion)
	if err != nil {
		return nil, err
	}
	if err := s.checkValue(req.Value); err != nil {
		return nil, err
	}
	rev, err := s.write(ctx, conds, []mutation{{key: req.Key, value: req.Value, session: req.Session}})
	if err != nil {
		return nil, err
	}
	return &sdk.PutResponse{Version: rev}, nil
}

// Delete implements sdk.MetadataStore.
func (s *Store) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	if req.ExpectVersion == sdk.MustNotExist {
		return nil, fmt.Errorf("%w: delete with ExpectVersion MustNotExist", sdk.ErrInvalidArgument)
	}
	conds, err := s.expect(req.Key, req.ExpectVersion)
	if err != nil {
		return nil, err
	}
	rev, err := s.write(ctx, conds, []mutation{{del: true, key: req.Key, mustExist: true}})
	if err != nil {
		return nil, err
	}
	return &sdk.DeleteResponse{Revision: rev}, nil
}

// Txn implements sdk.MetadataStore.
func (s *Store) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	for _, c := range req.Conditions {
		if err := checkKey(c.Key); err != nil {
			return nil, err
		}
		if c.Version < 0 {
			return nil, fmt.Errorf("%w: condition on %q with version %d", sdk.ErrInvalidArgument, c.Key, c.Version)
		}
	}
	muts := make([]mutation, 0, len(req.Ops))
	seen := make(map[string]bool, len(req.Ops))
	for _, op := range req.Ops {
		if err := checkKey(op.Key); err != nil {
			return nil, err
		}
		if seen[op.Key] {
			return nil, fmt.Errorf("%w: key %q named twice in a txn", sdk.ErrInvalidArgument, op.Key)
		}
		seen[op.Key] = true
		switch op.Type {
		case sdk.OpPut:
			if err := s.checkValue(op.Value); err != nil {
				return nil, err
			}
			muts = append(muts, mutation{key: op.Key, value: op.Value, session: op.Session})
		case sdk.OpDelete:
			muts = append(muts, mutation{del: true, key: op.Key})
		default:
			return nil, fmt.Errorf("%w: op type %d", sdk.ErrInvalidArgument, op.Type)
		}
	}
	rev, err := s.write(ctx, req.Conditions, muts)
	if err != nil {
		return nil, err
	}
	return &sdk.TxnResponse{Revision: rev}, nil
}

// expect turns an ExpectVersion into conditions.
func (s *Store) expect(key string, v int64) ([]sdk.Condition, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	switch {
	case v == sdk.AnyVersion:
		return nil, nil
	case v < sdk.AnyVersion:
		return nil, fmt.Errorf("%w: ExpectVersion %d", sdk.ErrInvalidArgument, v)
	}
	return []sdk.Condition{{Key: key, Version: v}}, nil
}

func (s *Store) checkValue(v []byte) error {
	if len(v) > s.opts.MaxValueBytes {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", sdk.ErrInvalidArgument, len(v), s.opts.MaxValueBytes)
	}
	return nil
}

// write applies muts at the next revision if every condition holds and
// returns that revision (the current one if nothing changed).
func (s *Store) write(ctx context.Context, conds []sdk.Condition, muts []mutation) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, sdk.ErrClosed
	}
	now := time.Now()
	for _, m := range muts {
		if !m.del && m.session != sdk.NoSession && s.liveSessionLocked(m.session, now) == nil {
			return 0, fmt.Errorf("%w: session %d", sdk.ErrSessionExpired, m.session)
		}
	}
	return s.applyLocked(conds, muts)
}

// change is one applied mutation: its event and the key's owner before.
type change struct {
	ev         *sdk.WatchEvent
	oldSession sdk.SessionID
}

// applyLocked commits one write to bbolt, then updates the session index
// and publishes the events. It consumes a revision only if a key changed.
func (s *Store) applyLocked(conds []sdk.Condition, muts []mutation) (int64, error) {
	rev := s.rev + 1
	var changes []change
	err := s.db.Update(func(tx *bolt.Tx) error {
		kv := tx.Bucket(bucketKV)
		for _, c := range conds {
			cur, err := currentRecord(kv, c.Key)
			if err != nil {
				return err
			}
			if cur.version != c.Version {
				return fmt.Errorf("%w: key %q is at version %d, want %d", sdk.ErrVersionMismatch, c.Key, cur.version, c.Version)
			}
		}
		var err error
		if changes, err = applyMutations(kv, muts, rev); err != nil {
			return err
		}
		if len(changes) == 0 {
			return errNoChange
		}
		return tx.Bucket(bucketMeta).Put(keyRevision, encodeRevision(rev))
	})
	switch {
	case errors.Is(err, errNoChange):
		return s.rev, nil
	case err != nil:
		return 0, err
	}
	s.rev = rev
	events := make([]*sdk.WatchEvent, len(changes))
	for i, c := range changes {
		s.moveKeyLocked(c.ev.Key, c.oldSession, c.ev.Session)
		events[i] = c.ev
	}
	s.publishLocked(events)
	return rev, nil
}

// applyMutations writes muts into kv at revision rev.
func applyMutations(kv *bolt.Bucket, muts []mutation, rev int64) ([]change, error) {
	var changes []change
	for _, m := range muts {
		cur, err := currentRecord(kv, m.key)
		if err != nil {
			return nil, err
		}
		if m.del {
			switch {
			case cur.version == 0 && m.mustExist:
				return nil, fmt.Errorf("%w: %q", sdk.ErrNotFound, m.key)
			case cur.version == 0, m.onlySession != sdk.NoSession && cur.session != m.onlySession:
				continue
			}
			if err := kv.Delete([]byte(m.key)); err != nil {
				return nil, err
			}
			ev := &sdk.WatchEvent{Type: sdk.EventDelete, Key: m.key, Revision: rev}
			changes = append(changes, change{ev: ev, oldSession: cur.session})
			continue
		}
		if err := kv.Put([]byte(m.key), encodeRecord(rev, m.session, m.value)); err != nil {
			return nil, err
		}
		ev := &sdk.WatchEvent{Type: sdk.EventPut, Key: m.key, Value: bytes.Clone(m.value),
			Version: rev, Session: m.session, Revision: rev}
		changes = append(changes, change{ev: ev, oldSession: cur.session})
	}
	return changes, nil
}

// currentRecord returns the key's record, or a zero record (version 0)
// if it is absent.
func currentRecord(kv *bolt.Bucket, key string) (record, error) {
	b := kv.Get([]byte(key))
	if b == nil {
		return record{}, nil
	}
	return decodeRecord([]byte(key), b)
}
