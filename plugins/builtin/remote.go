package builtin

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/vltava/vltava/plugins/metastore/etcd"
	"github.com/vltava/vltava/plugins/metastore/zookeeper"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// remoteStore is a metadata store kept in an external service
// (ZooKeeper, etcd) as a plugin: Configure decodes its config and
// connects. Calls before that fail with sdk.ErrUnavailable.
type remoteStore struct {
	name string
	open func(ctx context.Context, raw map[string]any) (store, error)

	mu sync.Mutex
	st store
}

type store interface {
	sdk.MetadataStore
	sdk.Compactor
}

var (
	_ sdk.MetadataStore = (*remoteStore)(nil)
	_ sdk.Compactor     = (*remoteStore)(nil)
	_ serve.Configurer  = (*remoteStore)(nil)
)

// NewZooKeeperStore is the built-in "zookeeper" store; its config is
// zookeeper.Config (connect, session.timeout, auth.digest, tls.*, ...).
func NewZooKeeperStore() sdk.MetadataStore {
	return &remoteStore{name: "zookeeper", open: func(ctx context.Context, raw map[string]any) (store, error) {
		var cfg zookeeper.Config
		if err := serve.DecodeConfig(raw, &cfg); err != nil {
			return nil, err
		}
		return zookeeper.Open(ctx, cfg, slog.Default())
	}}
}

// NewEtcdStore is the built-in "etcd" store; its config is etcd.Config
// (endpoints, prefix, username, password, tls.*, ...).
func NewEtcdStore() sdk.MetadataStore {
	return &remoteStore{name: "etcd", open: func(ctx context.Context, raw map[string]any) (store, error) {
		var cfg etcd.Config
		if err := serve.DecodeConfig(raw, &cfg); err != nil {
			return nil, err
		}
		return etcd.Open(ctx, cfg, slog.Default())
	}}
}

// Configure connects to the service.
func (r *remoteStore) Configure(ctx context.Context, raw map[string]any) error {
	st, err := r.open(ctx, raw)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st != nil {
		st.Close()
		return fmt.Errorf("%s plugin: already configured", r.name)
	}
	r.st = st
	return nil
}

func remoteCall[Req, Resp any](r *remoteStore, ctx context.Context, req Req, f func(store, context.Context, Req) (Resp, error)) (Resp, error) {
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	if st == nil {
		var zero Resp
		return zero, fmt.Errorf("%s plugin: not configured yet: %w", r.name, sdk.ErrUnavailable)
	}
	return f(st, ctx, req)
}

// Get calls the open store.
func (r *remoteStore) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	return remoteCall(r, ctx, req, store.Get)
}

// List calls the open store.
func (r *remoteStore) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	return remoteCall(r, ctx, req, store.List)
}

// Put calls the open store.
func (r *remoteStore) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	return remoteCall(r, ctx, req, store.Put)
}

// Delete calls the open store.
func (r *remoteStore) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	return remoteCall(r, ctx, req, store.Delete)
}

// Txn calls the open store.
func (r *remoteStore) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	return remoteCall(r, ctx, req, store.Txn)
}

// Watch calls the open store.
func (r *remoteStore) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	return remoteCall(r, ctx, req, store.Watch)
}

// GrantSession calls the open store.
func (r *remoteStore) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	return remoteCall(r, ctx, req, store.GrantSession)
}

// KeepAlive calls the open store.
func (r *remoteStore) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	return remoteCall(r, ctx, req, store.KeepAlive)
}

// RevokeSession calls the open store.
func (r *remoteStore) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	return remoteCall(r, ctx, req, store.RevokeSession)
}

// Compact calls the open store.
func (r *remoteStore) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	return remoteCall(r, ctx, req, store.Compact)
}

// Close closes the store if it was opened.
func (r *remoteStore) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st == nil {
		return nil
	}
	return r.st.Close()
}
