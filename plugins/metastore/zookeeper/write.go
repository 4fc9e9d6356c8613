package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
	"github.com/vltava/vltava/plugins/sdk"
)

// keyState is a key as a write read it.
type keyState struct {
	exists bool
	rec    record
	zkVer  int32 // the znode's data version, checked by the multi
}

func (k keyState) version() int64 {
	if !k.exists {
		return 0
	}
	return k.rec.version
}

// zop is one multi op; sessionCheck marks the ops that fail when a
// session has ended.
type zop struct {
	req          any
	sessionCheck bool
}

// builder turns the keys' current states into the multi's ops (without
// the rev and log ops, which write adds) and the write's events.
type builder func(view map[string]keyState, rev int64) ([]zop, []sdk.WatchEvent, error)

// write commits one store write: it reads the revision (the rev znode's
// data version v) and the keys, builds the ops, and runs them in one
// multi together with "set rev at version v" and "create log/<v+1>". If
// any other write committed in between, the rev op fails and write reads
// again: every write is serialised on the rev znode, so the conditions it
// checked hold when it commits. It returns the write's revision, or the
// current one when the write changes nothing.
func (s *Store) write(ctx context.Context, keys []string, build builder) (int64, error) {
	return s.writeKeys(ctx, func() ([]string, error) { return keys, nil }, build)
}

// writeKeys is write for a key set that must be read at the write's
// revision: listKeys runs after the revision is read.
func (s *Store) writeKeys(ctx context.Context, listKeys func() ([]string, error), build builder) (int64, error) {
	if _, err := s.conn.Sync(s.p.root); err != nil {
		return 0, err
	}
	contradictions := 0
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		cur, v, err := s.readRev()
		if err != nil {
			return 0, err
		}
		keys, err := listKeys()
		if err != nil {
			return 0, err
		}
		view := make(map[string]keyState, len(keys))
		for _, k := range keys {
			if _, ok := view[k]; ok {
				continue
			}
			data, st, err := s.conn.Get(s.p.key(k))
			switch {
			case errors.Is(err, zk.ErrNoNode):
				view[k] = keyState{}
				continue
			case err != nil:
				return 0, err
			}
			rec, err := decodeRecord(data)
			if err != nil {
				return 0, err
			}
			view[k] = keyState{exists: true, rec: rec, zkVer: st.Version}
		}
		rev := cur + 1
		zops, evs, err := build(view, rev)
		if err != nil {
			return 0, err
		}
		if len(zops) == 0 {
			return cur, nil
		}
		ops := make([]any, 0, len(zops)+2)
		if len(evs) == 0 {
			// Bookkeeping only (stale index entries): no revision.
			ops = append(ops, &zk.CheckVersionRequest{Path: s.p.rev, Version: v})
		} else {
			ops = append(ops, &zk.SetDataRequest{Path: s.p.rev, Version: v})
		}
		for _, o := range zops {
			ops = append(ops, o.req)
		}
		if len(evs) > 0 {
			ops = append(ops, &zk.CreateRequest{Path: s.p.logEntry(rev), Data: encodeLog(evs), Acl: s.acl})
		}
		resp, err := s.conn.Multi(ops...)
		if err == nil {
			if len(evs) == 0 {
				return cur, nil
			}
			s.notePrune(rev)
			return rev, nil
		}
		i := failedOp(resp)
		switch {
		case i == 0 && errors.Is(err, zk.ErrBadVersion):
			continue // another write committed first: read again
		case i > 0 && i <= len(zops) && zops[i-1].sessionCheck && errors.Is(err, zk.ErrNoNode):
			return 0, fmt.Errorf("zookeeper store: %w", sdk.ErrSessionExpired)
		case i > 0 && (errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists)):
			// Cannot happen while every writer follows the rev protocol;
			// read again rather than trust a view it contradicts.
			contradictions++
			if contradictions > 5 {
				return 0, fmt.Errorf("zookeeper store: op %T %+v failed: %w", ops[i], ops[i], err)
			}
			s.logger.Warn("zookeeper store: a multi op contradicted the write's view; retrying", "op", i, "err", err)
			continue
		}
		return 0, err
	}
}

// failedOp is the index of the op that failed a multi, or -1: ZooKeeper
// reports success for the ops before it and "runtime inconsistency" for
// those after.
func failedOp(resp []zk.MultiResponse) int {
	for i, r := range resp {
		if r.Error != nil {
			return i
		}
	}
	return -1
}

// putOps writes key = value owned by session, moving the key's entry in
// the sessions index when its owner changes.
func (s *Store) putOps(st keyState, key string, value []byte, session sdk.SessionID, rev int64) ([]zop, sdk.WatchEvent) {
	var ops []zop
	rec := encodeRecord(rev, session, value)
	if st.exists {
		ops = append(ops, zop{req: &zk.SetDataRequest{Path: s.p.key(key), Data: rec, Version: st.zkVer}})
	} else {
		ops = append(ops, zop{req: &zk.CreateRequest{Path: s.p.key(key), Data: rec, Acl: s.acl}})
	}
	old := sdk.NoSession
	if st.exists {
		old = st.rec.session
	}
	if session != sdk.NoSession {
		ops = append(ops, zop{req: &zk.CheckVersionRequest{Path: s.p.liveNode(session), Version: -1}, sessionCheck: true})
		if session != old {
			ops = append(ops, zop{req: &zk.CreateRequest{Path: s.p.owned(session, key), Acl: s.acl}, sessionCheck: true})
		}
	}
	if old != sdk.NoSession && old != session {
		ops = append(ops, zop{req: &zk.DeleteRequest{Path: s.p.owned(old, key), Version: -1}})
	}
	if value == nil {
		value = []byte{}
	}
	return ops, sdk.WatchEvent{Type: sdk.EventPut, Key: key, Value: value, Version: rev, Session: session, Revision: rev}
}

// deleteOps removes an existing key and its sessions index entry.
func (s *Store) deleteOps(st keyState, key string, rev int64) ([]zop, sdk.WatchEvent) {
	ops := []zop{{req: &zk.DeleteRequest{Path: s.p.key(key), Version: st.zkVer}}}
	if st.rec.session != sdk.NoSession {
		ops = append(ops, zop{req: &zk.DeleteRequest{Path: s.p.owned(st.rec.session, key), Version: -1}})
	}
	return ops, sdk.WatchEvent{Type: sdk.EventDelete, Key: key, Revision: rev}
}

func checkView(conds []sdk.Condition, view map[string]keyState) error {
	return writecheck.CheckConditions(conds, func(k string) (int64, error) { return view[k].version(), nil })
}

// Put writes one key under its condition.
func (s *Store) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	conds, err := s.lim.Put(req)
	if err != nil {
		return nil, err
	}
	var rev int64
	err = s.run(ctx, "put", func(ctx context.Context) (err error) {
		rev, err = s.write(ctx, []string{req.Key}, func(view map[string]keyState, rev int64) ([]zop, []sdk.WatchEvent, error) {
			if err := checkView(conds, view); err != nil {
				return nil, nil, err
			}
			ops, ev := s.putOps(view[req.Key], req.Key, req.Value, req.Session, rev)
			return ops, []sdk.WatchEvent{ev}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &sdk.PutResponse{Version: rev}, nil
}

// Delete removes one key under its condition.
func (s *Store) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	conds, err := s.lim.Delete(req)
	if err != nil {
		return nil, err
	}
	var rev int64
	err = s.run(ctx, "delete", func(ctx context.Context) (err error) {
		rev, err = s.write(ctx, []string{req.Key}, func(view map[string]keyState, rev int64) ([]zop, []sdk.WatchEvent, error) {
			if err := checkView(conds, view); err != nil {
				return nil, nil, err
			}
			st := view[req.Key]
			if !st.exists {
				return nil, nil, fmt.Errorf("zookeeper store: delete %q: %w", req.Key, sdk.ErrNotFound)
			}
			ops, ev := s.deleteOps(st, req.Key, rev)
			return ops, []sdk.WatchEvent{ev}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &sdk.DeleteResponse{Revision: rev}, nil
}

// Txn applies its ops in one multi if every condition holds.
func (s *Store) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	if err := s.lim.Txn(req); err != nil {
		return nil, err
	}
	var keys []string
	for _, c := range req.Conditions {
		keys = append(keys, c.Key)
	}
	for _, op := range req.Ops {
		keys = append(keys, op.Key)
	}
	var rev int64
	err := s.run(ctx, "txn", func(ctx context.Context) (err error) {
		rev, err = s.write(ctx, keys, func(view map[string]keyState, rev int64) ([]zop, []sdk.WatchEvent, error) {
			if err := checkView(req.Conditions, view); err != nil {
				return nil, nil, err
			}
			var ops []zop
			var evs []sdk.WatchEvent
			for _, op := range req.Ops {
				st := view[op.Key]
				switch {
				case op.Type == sdk.OpPut:
					o, ev := s.putOps(st, op.Key, op.Value, op.Session, rev)
					ops, evs = append(ops, o...), append(evs, ev)
				case st.exists: // a delete of an absent key is a no-op
					o, ev := s.deleteOps(st, op.Key, rev)
					ops, evs = append(ops, o...), append(evs, ev)
				}
			}
			return ops, evs, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &sdk.TxnResponse{Revision: rev}, nil
}

func encodeRev(rev int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(rev)) }

func decodeRev(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: compact znode of %d bytes", errCorrupt, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
