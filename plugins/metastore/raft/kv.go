package raft

import (
	"context"
	"fmt"

	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
	"github.com/vltava/vltava/plugins/sdk"
)

// propose appends c through the leader and returns the state machine's
// answer.
func (s *Store) propose(ctx context.Context, c *command) (applyResult, error) {
	if !s.enter() {
		return applyResult{}, sdk.ErrClosed
	}
	defer s.exit()
	var res applyResult
	err := s.onLeader(ctx, func() error {
		var err error
		res, err = s.localPropose(c)
		return err
	}, func(ctx context.Context, addr string) error {
		r, err := s.forward(ctx, addr, pathApply, &fwdRequest{Cmd: c.encode()})
		if r != nil {
			res.rev, res.session = r.Rev, r.Session
		}
		return err
	})
	return res, err
}

// read runs a linearizable read on the leader: local reads the leader's
// state machine, remote asks the leader over the forwarding protocol.
func (s *Store) read(ctx context.Context, local func(), remote func(ctx context.Context, addr string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.enter() {
		return sdk.ErrClosed
	}
	defer s.exit()
	return s.onLeader(ctx, func() error {
		if err := s.leaderRead(); err != nil {
			return err
		}
		local()
		return nil
	}, remote)
}

// Get implements sdk.MetadataStore.
func (s *Store) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	if err := checkKey(req.Key); err != nil {
		return nil, err
	}
	var (
		kv    sdk.KeyValue
		found bool
		rev   int64
	)
	err := s.read(ctx, func() { kv, found, rev = s.fsm.get(req.Key) }, func(ctx context.Context, addr string) error {
		r, err := s.forward(ctx, addr, pathGet, &fwdRequest{Key: req.Key})
		if err == nil {
			kv, found, rev = r.KV, r.Found, r.Rev
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", sdk.ErrNotFound, req.Key)
	}
	return &sdk.GetResponse{KeyValue: kv, Revision: rev}, nil
}

// List implements sdk.MetadataStore.
func (s *Store) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	resp := &sdk.ListResponse{}
	err := s.read(ctx, func() { resp.KVs, resp.Revision = s.fsm.list(req.Prefix) }, func(ctx context.Context, addr string) error {
		r, err := s.forward(ctx, addr, pathList, &fwdRequest{Prefix: req.Prefix})
		if err == nil {
			resp.KVs, resp.Revision = r.KVs, r.Rev
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Put implements sdk.MetadataStore.
func (s *Store) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	conds, err := s.limits().Put(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &command{typ: cmdWrite, conds: conds,
		ops: []wop{{kind: opPut, key: req.Key, value: req.Value, session: req.Session}}})
	if err != nil {
		return nil, err
	}
	return &sdk.PutResponse{Version: res.rev}, nil
}

// Delete implements sdk.MetadataStore.
func (s *Store) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	conds, err := s.limits().Delete(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &command{typ: cmdWrite, conds: conds, ops: []wop{{kind: opDeleteMustExist, key: req.Key}}})
	if err != nil {
		return nil, err
	}
	return &sdk.DeleteResponse{Revision: res.rev}, nil
}

// Txn implements sdk.MetadataStore.
func (s *Store) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	if err := s.limits().Txn(req); err != nil {
		return nil, err
	}
	ops := make([]wop, 0, len(req.Ops))
	for _, op := range req.Ops {
		if op.Type == sdk.OpPut {
			ops = append(ops, wop{kind: opPut, key: op.Key, value: op.Value, session: op.Session})
		} else {
			ops = append(ops, wop{kind: opDelete, key: op.Key})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &command{typ: cmdWrite, conds: req.Conditions, ops: ops})
	if err != nil {
		return nil, err
	}
	return &sdk.TxnResponse{Revision: res.rev}, nil
}

// Watch implements sdk.MetadataStore. Events come from this node's own
// applied log, so a watch on a follower sees every change in order.
// FromRevision 0 starts from the leader's current revision (read
// linearizably), so no write that returned before Watch is delivered.
func (s *Store) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.FromRevision < 0 {
		return nil, fmt.Errorf("%w: FromRevision %d", sdk.ErrInvalidArgument, req.FromRevision)
	}
	after := req.FromRevision
	if after == 0 {
		var err error
		if after, err = s.currentRevision(ctx); err != nil {
			return nil, err
		}
	}
	w, err := s.fsm.watch(req.Prefix, after, req.FromRevision == 0)
	if err != nil {
		return nil, err
	}
	return w.Attach(ctx), nil
}

// currentRevision reads the store revision linearizably (on the leader).
func (s *Store) currentRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.read(ctx, func() { rev = s.fsm.revision() }, func(ctx context.Context, addr string) error {
		r, err := s.forward(ctx, addr, pathRevision, &fwdRequest{})
		if err == nil {
			rev = r.Rev
		}
		return err
	})
	return rev, err
}

// Compact implements sdk.Compactor. Watch history is per node and in
// memory, so this trims this node's history only.
func (s *Store) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.Revision < 0 {
		return nil, fmt.Errorf("%w: compact to revision %d", sdk.ErrInvalidArgument, req.Revision)
	}
	if req.Revision > s.fsm.revision() { // this node may lag: ask the leader
		cur, err := s.currentRevision(ctx)
		if err != nil {
			return nil, err
		}
		if req.Revision > cur {
			return nil, fmt.Errorf("%w: compact to revision %d, current %d", sdk.ErrInvalidArgument, req.Revision, cur)
		}
	}
	if !s.enter() {
		return nil, sdk.ErrClosed
	}
	defer s.exit()
	s.fsm.compactHistory(req.Revision)
	return &sdk.CompactResponse{}, nil
}

// limits are the store's key and value bounds.
func (s *Store) limits() writecheck.Limits {
	return writecheck.Limits{MaxKeyBytes: maxKeyBytes, MaxValueBytes: s.cfg.MaxValueBytes}
}

func checkKey(key string) error { return writecheck.Limits{MaxKeyBytes: maxKeyBytes}.Key(key) }
