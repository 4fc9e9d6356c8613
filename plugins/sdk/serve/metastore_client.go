package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

var errNoCompactor = fmt.Errorf("serve: the store does not implement sdk.Compactor: %w", sdk.ErrInvalidArgument)

// NewMetadataStoreClient returns an sdk.MetadataStore that calls the
// plugin behind c. With compactor (from Info) the result also implements
// sdk.Compactor. Close closes the adapter and its watches, not the
// plugin process: the host owns that.
func NewMetadataStoreClient(c Conn, compactor bool) sdk.MetadataStore {
	s := &storeClient{c: c, watches: make(map[*watchClient]struct{})}
	if compactor {
		return &compactingStoreClient{s}
	}
	return s
}

type storeClient struct {
	c Conn

	mu      sync.Mutex
	closed  bool
	watches map[*watchClient]struct{}
}

type compactingStoreClient struct{ *storeClient }

func (s *compactingStoreClient) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	if _, err := cl.Compact(ctx, &pluginpb.CompactRequest{Revision: req.Revision}); err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.CompactResponse{}, nil
}

func (s *storeClient) client() (pluginpb.MetadataStoreClient, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("serve: %s: %w", s.c, sdk.ErrClosed)
	}
	cc, err := s.c.Conn()
	if err != nil {
		return nil, err
	}
	return pluginpb.NewMetadataStoreClient(cc), nil
}

func (s *storeClient) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Get(ctx, &pluginpb.GetRequest{Key: req.Key})
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.GetResponse{KeyValue: kvFromPB(resp.Kv), Revision: resp.Revision}, nil
}

func (s *storeClient) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.List(ctx, &pluginpb.ListRequest{Prefix: req.Prefix})
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	out := &sdk.ListResponse{Revision: resp.Revision, KVs: make([]sdk.KeyValue, len(resp.Kvs))}
	for i, kv := range resp.Kvs {
		out.KVs[i] = kvFromPB(kv)
	}
	return out, nil
}

func (s *storeClient) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Put(ctx, &pluginpb.PutRequest{Key: req.Key, Value: req.Value, ExpectVersion: req.ExpectVersion, Session: int64(req.Session)})
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.PutResponse{Version: resp.Version}, nil
}

func (s *storeClient) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Delete(ctx, &pluginpb.DeleteRequest{Key: req.Key, ExpectVersion: req.ExpectVersion})
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.DeleteResponse{Revision: resp.Revision}, nil
}

func (s *storeClient) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	in := &pluginpb.TxnRequest{}
	for _, c := range req.Conditions {
		in.Conditions = append(in.Conditions, &pluginpb.Condition{Key: c.Key, Version: c.Version})
	}
	for _, op := range req.Ops {
		in.Ops = append(in.Ops, &pluginpb.Op{Type: int32(op.Type), Key: op.Key, Value: op.Value, Session: int64(op.Session)})
	}
	resp, err := cl.Txn(ctx, in)
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.TxnResponse{Revision: resp.Revision}, nil
}

func (s *storeClient) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.GrantSession(ctx, &pluginpb.GrantSessionRequest{TtlNanos: int64(req.TTL)})
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.GrantSessionResponse{ID: sdk.SessionID(resp.Id), TTL: time.Duration(resp.TtlNanos)}, nil
}

func (s *storeClient) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.KeepAlive(ctx, &pluginpb.KeepAliveRequest{Id: int64(req.ID)})
	if err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.KeepAliveResponse{TTL: time.Duration(resp.TtlNanos)}, nil
}

func (s *storeClient) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	if _, err := cl.RevokeSession(ctx, &pluginpb.RevokeSessionRequest{Id: int64(req.ID)}); err != nil {
		return nil, fromStatus(ctx, s.c, err)
	}
	return &sdk.RevokeSessionResponse{}, nil
}

// Close ends the adapter: open watches end with sdk.ErrClosed and later
// calls fail with it.
func (s *storeClient) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ws := s.watches
	s.watches = nil
	s.mu.Unlock()
	for w := range ws {
		w.end(sdk.ErrClosed)
	}
	return nil
}

// track registers an open watch; false if the store is closed.
func (s *storeClient) track(w *watchClient) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.watches[w] = struct{}{}
	return true
}

func (s *storeClient) untrack(w *watchClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watches, w)
}

var errWatchProtocol = errors.New("serve: watch stream did not start with its established marker")
