package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
	"github.com/vltava/vltava/plugins/sdk"
)

// Store is an sdk.MetadataStore on an etcd cluster.
type Store struct {
	cfg    Config
	cli    *clientv3.Client
	lim    writecheck.Limits
	logger *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ sdk.MetadataStore = (*Store)(nil)
	_ sdk.Compactor     = (*Store)(nil)
)

// Open connects to the cluster and checks it answers. It does not write.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.endpoints(),
		DialTimeout: cfg.DialTimeout,
		TLS:         tlsCfg,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		// Keep-alive pings notice a dead endpoint and switch to another.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd store: connect %s: %v: %w", cfg.Endpoints, err, sdk.ErrUnavailable)
	}
	s := &Store{
		cfg: cfg, cli: cli, logger: logger,
		lim:    writecheck.Limits{MaxKeyBytes: maxKeyBytes, MaxValueBytes: cfg.MaxValueBytes},
		closed: make(chan struct{}),
	}
	// One read proves the endpoints, the credentials and a leader.
	rctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(clientv3.WithRequireLeader(rctx), cfg.Prefix, clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd store: first read from %s: %v: %w", cfg.Endpoints, err, sdk.ErrUnavailable)
	}
	return s, nil
}

// Close closes the client; open watches end with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cli.Close()
	})
	return nil
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

var errClosed = fmt.Errorf("etcd store: %w", sdk.ErrClosed)

// begin checks the store is open and bounds one request.
func (s *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.isClosed() {
		return nil, nil, errClosed
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	return clientv3.WithRequireLeader(rctx), cancel, nil
}

// mapErr turns a client error into the contract's: the caller's ctx
// error as is, lease and compaction errors to their sentinels, anything
// else (no leader, endpoints down, our request timeout) to ErrUnavailable.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case s.isClosed():
		return errClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("etcd store: %s: %w", op, sdk.ErrSessionExpired)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("etcd store: %s: %w", op, sdk.ErrCompacted)
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("etcd store: %s: %v: %w", op, err, sdk.ErrInvalidArgument)
	}
	return fmt.Errorf("etcd store: %s: %v: %w", op, err, sdk.ErrUnavailable)
}

func (s *Store) key(k string) string { return s.cfg.Prefix + k }

func (s *Store) kv(k string, v []byte, modRev, lease int64) sdk.KeyValue {
	return sdk.KeyValue{Key: k, Value: v, Version: modRev, Session: sdk.SessionID(lease)}
}

// Get reads one key (a linearizable read).
func (s *Store) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	if err := s.lim.Key(req.Key); err != nil {
		return nil, err
	}
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := s.cli.Get(rctx, s.key(req.Key))
	if err != nil {
		return nil, s.mapErr(ctx, "get", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("etcd store: %q: %w", req.Key, sdk.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return &sdk.GetResponse{KeyValue: s.kv(req.Key, kv.Value, kv.ModRevision, kv.Lease), Revision: resp.Header.Revision}, nil
}

// List reads every key with the prefix in one range read; etcd returns
// them sorted by key.
func (s *Store) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := s.cli.Get(rctx, s.key(req.Prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, s.mapErr(ctx, "list", err)
	}
	out := &sdk.ListResponse{Revision: resp.Header.Revision, KVs: make([]sdk.KeyValue, 0, len(resp.Kvs))}
	for _, kv := range resp.Kvs {
		out.KVs = append(out.KVs, s.kv(string(kv.Key[len(s.cfg.Prefix):]), kv.Value, kv.ModRevision, kv.Lease))
	}
	return out, nil
}

// compares turns conditions into etcd comparisons: absence is a zero
// create revision, a version is the mod revision.
func (s *Store) compares(conds []sdk.Condition) []clientv3.Cmp {
	out := make([]clientv3.Cmp, 0, len(conds))
	for _, c := range conds {
		if c.Version == sdk.MustNotExist {
			out = append(out, clientv3.Compare(clientv3.CreateRevision(s.key(c.Key)), "=", 0))
		} else {
			out = append(out, clientv3.Compare(clientv3.ModRevision(s.key(c.Key)), "=", c.Version))
		}
	}
	return out
}

func (s *Store) putOp(key string, value []byte, session sdk.SessionID) clientv3.Op {
	if value == nil {
		value = []byte{}
	}
	if session != sdk.NoSession {
		return clientv3.OpPut(s.key(key), string(value), clientv3.WithLease(clientv3.LeaseID(session)))
	}
	return clientv3.OpPut(s.key(key), string(value))
}

// txn runs one etcd transaction: if every comparison holds, ops.
func (s *Store) txn(ctx context.Context, op string, cmps []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := s.cli.Txn(rctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("etcd store: %s: %w", op, sdk.ErrVersionMismatch)
	}
	return resp, nil
}

// Put writes one key under its condition; a session attaches the key to
// the session's lease.
func (s *Store) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	conds, err := s.lim.Put(req)
	if err != nil {
		return nil, err
	}
	resp, err := s.txn(ctx, "put", s.compares(conds), s.putOp(req.Key, req.Value, req.Session))
	if err != nil {
		return nil, err
	}
	return &sdk.PutResponse{Version: resp.Header.Revision}, nil
}

// Delete removes one key under its condition.
func (s *Store) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	conds, err := s.lim.Delete(req)
	if err != nil {
		return nil, err
	}
	resp, err := s.txn(ctx, "delete", s.compares(conds), clientv3.OpDelete(s.key(req.Key)))
	if err != nil {
		return nil, err
	}
	if resp.Responses[0].GetResponseDeleteRange().GetDeleted() == 0 {
		return nil, fmt.Errorf("etcd store: delete %q: %w", req.Key, sdk.ErrNotFound)
	}
	return &sdk.DeleteResponse{Revision: resp.Header.Revision}, nil
}

// Txn is one etcd transaction.
func (s *Store) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	if err := s.lim.Txn(req); err != nil {
		return nil, err
	}
	ops := make([]clientv3.Op, 0, len(req.Ops))
	for _, op := range req.Ops {
		if op.Type == sdk.OpPut {
			ops = append(ops, s.putOp(op.Key, op.Value, op.Session))
		} else {
			ops = append(ops, clientv3.OpDelete(s.key(op.Key)))
		}
	}
	resp, err := s.txn(ctx, "txn", s.compares(req.Conditions), ops...)
	if err != nil {
		return nil, err
	}
	return &sdk.TxnResponse{Revision: resp.Header.Revision}, nil
}

// GrantSession grants a lease. etcd counts TTLs in whole seconds and has a
// minimum (about 1.5 election timeouts); the granted TTL is what the
// server reports.
func (s *Store) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	if req.TTL <= 0 {
		return nil, fmt.Errorf("etcd store: session TTL %v: %w", req.TTL, sdk.ErrInvalidArgument)
	}
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	secs := int64((req.TTL + time.Second - 1) / time.Second)
	resp, err := s.cli.Grant(rctx, secs)
	if err != nil {
		return nil, s.mapErr(ctx, "grant lease", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	if ttl < req.TTL {
		ttl = time.Duration(secs) * time.Second
	}
	return &sdk.GrantSessionResponse{ID: sdk.SessionID(resp.ID), TTL: ttl}, nil
}

// KeepAlive renews the lease once.
func (s *Store) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := s.cli.KeepAliveOnce(rctx, clientv3.LeaseID(req.ID))
	if err != nil {
		return nil, s.mapErr(ctx, "keep lease alive", err)
	}
	if resp.TTL <= 0 {
		return nil, fmt.Errorf("etcd store: lease %x: %w", req.ID, sdk.ErrSessionExpired)
	}
	return &sdk.KeepAliveResponse{TTL: time.Duration(resp.TTL) * time.Second}, nil
}

// RevokeSession revokes the lease; etcd deletes its keys in one revision.
func (s *Store) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if _, err := s.cli.Revoke(rctx, clientv3.LeaseID(req.ID)); err != nil {
		return nil, s.mapErr(ctx, "revoke lease", err)
	}
	return &sdk.RevokeSessionResponse{}, nil
}

// Compact compacts etcd's history so that revisions at and below
// req.Revision are gone (etcd keeps the compaction revision itself, so
// the plugin compacts at Revision+1, or at the current revision if that
// is lower). etcd's compaction is cluster-wide: it also discards the
// history of keys outside the prefix.
func (s *Store) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	if req.Revision <= 0 {
		return nil, fmt.Errorf("etcd store: compact at %d: %w", req.Revision, sdk.ErrInvalidArgument)
	}
	rctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	cur, err := s.cli.Get(rctx, s.cfg.Prefix, clientv3.WithCountOnly())
	if err != nil {
		return nil, s.mapErr(ctx, "compact", err)
	}
	rev := min(req.Revision+1, cur.Header.Revision)
	if _, err := s.cli.Compact(rctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return nil, s.mapErr(ctx, "compact", err)
	}
	return &sdk.CompactResponse{}, nil
}
