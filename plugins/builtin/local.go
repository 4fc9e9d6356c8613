package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// LocalConfig is the config of the built-in "local" metadata store.
type LocalConfig struct {
	// Path is the bbolt file; its directory is created if missing.
	Path              string        `mapstructure:"path"`
	WatchHistory      int           `mapstructure:"watch.history"`
	WatchHistoryBytes int           `mapstructure:"watch.history.bytes"`
	WatchBuffer       int           `mapstructure:"watch.buffer"`
	MaxValueBytes     int           `mapstructure:"max.value.bytes"`
	LockTimeout       time.Duration `mapstructure:"lock.timeout"`
}

// LocalStore is the local store as a plugin: it opens the store when
// Configure gives it a path. Calls before that fail with
// sdk.ErrUnavailable.
type LocalStore struct {
	mu sync.Mutex
	st *local.Store
}

var (
	_ sdk.MetadataStore = (*LocalStore)(nil)
	_ sdk.Compactor     = (*LocalStore)(nil)
	_ serve.Configurer  = (*LocalStore)(nil)
)

// Configure decodes LocalConfig and opens the store.
func (l *LocalStore) Configure(_ context.Context, raw map[string]any) error {
	var cfg LocalConfig
	if err := serve.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	if cfg.Path == "" {
		return fmt.Errorf("config: key \"path\" is required: %w", sdk.ErrInvalidArgument)
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return fmt.Errorf("local plugin: %w", err)
	}
	st, err := local.Open(cfg.Path, local.Options{
		Logger: slog.Default(), WatchHistory: cfg.WatchHistory, WatchHistoryBytes: cfg.WatchHistoryBytes,
		WatchBuffer: cfg.WatchBuffer, MaxValueBytes: cfg.MaxValueBytes, LockTimeout: cfg.LockTimeout,
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != nil {
		st.Close()
		return errors.New("local plugin: already configured")
	}
	l.st = st
	return nil
}

var errNotConfigured = fmt.Errorf("local plugin: not configured yet: %w", sdk.ErrUnavailable)

func (l *LocalStore) store() (*local.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st == nil {
		return nil, errNotConfigured
	}
	return l.st, nil
}

// call runs f on the open store.
func call[Req, Resp any](l *LocalStore, ctx context.Context, req Req, f func(*local.Store, context.Context, Req) (Resp, error)) (Resp, error) {
	st, err := l.store()
	if err != nil {
		var zero Resp
		return zero, err
	}
	return f(st, ctx, req)
}

// Get calls the open store.
func (l *LocalStore) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	return call(l, ctx, req, (*local.Store).Get)
}

// List calls the open store.
func (l *LocalStore) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	return call(l, ctx, req, (*local.Store).List)
}

// Put calls the open store.
func (l *LocalStore) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	return call(l, ctx, req, (*local.Store).Put)
}

// Delete calls the open store.
func (l *LocalStore) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	return call(l, ctx, req, (*local.Store).Delete)
}

// Txn calls the open store.
func (l *LocalStore) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	return call(l, ctx, req, (*local.Store).Txn)
}

// Watch calls the open store.
func (l *LocalStore) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	return call(l, ctx, req, (*local.Store).Watch)
}

// GrantSession calls the open store.
func (l *LocalStore) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	return call(l, ctx, req, (*local.Store).GrantSession)
}

// KeepAlive calls the open store.
func (l *LocalStore) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	return call(l, ctx, req, (*local.Store).KeepAlive)
}

// RevokeSession calls the open store.
func (l *LocalStore) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	return call(l, ctx, req, (*local.Store).RevokeSession)
}

// Compact calls the open store.
func (l *LocalStore) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	return call(l, ctx, req, (*local.Store).Compact)
}

// Close closes the store if it was opened.
func (l *LocalStore) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st == nil {
		return nil
	}
	return l.st.Close()
}
