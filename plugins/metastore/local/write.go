package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
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
	conds, err := s.limits().Put(req)
	if err != nil {
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
	conds, err := s.limits().Delete(req)
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
	if err := s.limits().Txn(req); err != nil {
		return nil, err
	}
	muts := make([]mutation, 0, len(req.Ops))
	for _, op := range req.Ops {
		if op.Type == sdk.OpPut {
			muts = append(muts, mutation{key: op.Key, value: op.Value, session: op.Session})
		} else {
			muts = append(muts, mutation{del: true, key: op.Key})
		}
	}
	rev, err := s.write(ctx, req.Conditions, muts)
	if err != nil {
		return nil, err
	}
	return &sdk.TxnResponse{Revision: rev}, nil
}

// limits are the store's key and value bounds.
func (s *Store) limits() writecheck.Limits {
	return writecheck.Limits{MaxKeyBytes: maxKeyBytes, MaxValueBytes: s.opts.MaxValueBytes}
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
		err := writecheck.CheckConditions(conds, func(key string) (int64, error) {
			cur, err := currentRecord(kv, key)
			return cur.version, err
		})
		if err != nil {
			return err
		}
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
	s.watch.PublishLocked(events)
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
