package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/vltava/vltava/plugins/metastore/internal/watchhub"
	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
	"github.com/vltava/vltava/plugins/sdk"
)

// ErrCorrupt marks a database whose content does not follow the format in
// doc.go. Check it with errors.Is.
var ErrCorrupt = errors.New("local: corrupt database")

// Options tune a Store. The zero value is usable.
type Options struct {
	// Logger receives session expiry and failure reports; nil means
	// slog.Default().
	Logger *slog.Logger
	// WatchHistory is how many recent events are kept for watches that
	// start from an older revision (default 10,000).
	WatchHistory int
	// WatchHistoryBytes caps the values held in that history (default
	// 64 MiB); whichever limit is hit first evicts the oldest events.
	WatchHistoryBytes int
	// WatchBuffer is how many events a watcher may lag behind the writers
	// before its stream ends with sdk.ErrWatchOverflow (default 1,024).
	WatchBuffer int
	// MaxValueBytes caps a value (default 1 MiB).
	MaxValueBytes int
	// LockTimeout bounds the wait for the file lock held by another
	// process (default 1s).
	LockTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WatchHistory <= 0 {
		o.WatchHistory = 10_000
	}
	if o.WatchHistoryBytes <= 0 {
		o.WatchHistoryBytes = 64 << 20
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = 1024
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 1 << 20
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
}

// Store is a sdk.MetadataStore (and sdk.Compactor) kept in one bbolt file.
type Store struct {
	db   *bolt.DB
	opts Options
	log  *slog.Logger

	closed atomic.Bool // set under mu; read without it by Get and List

	// mu serializes writes, sessions and watch registration, so a write's
	// events reach exactly the watchers registered before it.
	mu       sync.Mutex
	rev      int64 // REQUIRES mu; equals the "revision" on disk
	sessions map[sdk.SessionID]*session
	watch    *watchhub.Hub // guarded by mu

	wakeCh     chan struct{} // pokes the reaper after a grant; cap 1
	stopCh     chan struct{} // closed by Close to stop the reaper
	reaperDone chan struct{} // closed by the reaper when it returns

	closeOnce sync.Once
	closeErr  error
}

var (
	_ sdk.MetadataStore = (*Store)(nil)
	_ sdk.Compactor     = (*Store)(nil)
)

// Open opens or creates the store at path. Ephemeral keys left by an
// earlier process are deleted (one write). The Store must be closed.
func Open(path string, opts Options) (*Store, error) {
	opts.setDefaults()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	s := &Store{
		db:         db,
		opts:       opts,
		log:        opts.Logger,
		sessions:   make(map[sdk.SessionID]*session),
		wakeCh:     make(chan struct{}, 1),
		stopCh:     make(chan struct{}),
		reaperDone: make(chan struct{}),
	}
	s.watch = watchhub.New(&s.mu, watchhub.Config{Name: "local", History: opts.WatchHistory,
		HistoryBytes: opts.WatchHistoryBytes, Buffer: opts.WatchBuffer, Logger: opts.Logger})
	if err := s.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	// History before this process is gone: watches must start here or later.
	s.mu.Lock()
	s.watch.CompactLocked(s.rev)
	s.mu.Unlock()
	go s.reap()
	return s, nil
}

// init creates the buckets, checks the format, loads the revision and
// deletes stale ephemeral keys.
func (s *Store) init() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		kv, err := tx.CreateBucketIfNotExists(bucketKV)
		if err != nil {
			return err
		}
		switch f := meta.Get(keyFormat); {
		case f == nil:
			if err := meta.Put(keyFormat, []byte{formatVersion}); err != nil {
				return err
			}
		case len(f) != 1 || f[0] != formatVersion:
			return fmt.Errorf("%w: format %v, want %d", ErrCorrupt, f, formatVersion)
		}
		if s.rev, err = decodeRevision(meta.Get(keyRevision)); err != nil {
			return err
		}
		return s.dropEphemeral(meta, kv)
	})
}

// dropEphemeral deletes every key owned by a session, as one write.
func (s *Store) dropEphemeral(meta, kv *bolt.Bucket) error {
	var stale [][]byte
	err := kv.ForEach(func(k, v []byte) error {
		r, err := decodeRecord(k, v)
		if err != nil {
			return err
		}
		if r.version > s.rev {
			return fmt.Errorf("%w: key %q version %d above store revision %d", ErrCorrupt, k, r.version, s.rev)
		}
		if r.session != sdk.NoSession {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	})
	if err != nil || len(stale) == 0 {
		return err
	}
	for _, k := range stale {
		if err := kv.Delete(k); err != nil {
			return err
		}
	}
	s.rev++
	s.log.Info("local: deleted ephemeral keys of a previous process", "keys", len(stale), "revision", s.rev)
	return meta.Put(keyRevision, encodeRevision(s.rev))
}

// Close stops the reaper, ends every watch with sdk.ErrClosed and closes
// the file. Later calls return nil.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.mu.Lock()
		s.closed.Store(true)
		s.watch.CloseLocked()
		s.mu.Unlock()
		close(s.stopCh)
		<-s.reaperDone
		s.closeErr = s.db.Close()
	})
	if first {
		return s.closeErr
	}
	return nil
}

// view runs fn in a read transaction, with the revision it reflects.
func (s *Store) view(ctx context.Context, fn func(kv *bolt.Bucket, rev int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return sdk.ErrClosed
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		rev, err := decodeRevision(tx.Bucket(bucketMeta).Get(keyRevision))
		if err != nil {
			return err
		}
		return fn(tx.Bucket(bucketKV), rev)
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return sdk.ErrClosed
	}
	return err
}

// Get implements sdk.MetadataStore.
func (s *Store) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	if err := checkKey(req.Key); err != nil {
		return nil, err
	}
	var resp *sdk.GetResponse
	err := s.view(ctx, func(kv *bolt.Bucket, rev int64) error {
		b := kv.Get([]byte(req.Key))
		if b == nil {
			return fmt.Errorf("%w: %q", sdk.ErrNotFound, req.Key)
		}
		r, err := decodeRecord([]byte(req.Key), b)
		if err != nil {
			return err
		}
		resp = &sdk.GetResponse{KeyValue: r.keyValue(req.Key), Revision: rev}
		return nil
	})
	return resp, err
}

// List implements sdk.MetadataStore.
func (s *Store) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	resp := &sdk.ListResponse{}
	err := s.view(ctx, func(kv *bolt.Bucket, rev int64) error {
		resp.Revision = rev
		prefix := []byte(req.Prefix)
		c := kv.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			resp.KVs = append(resp.KVs, r.keyValue(string(k)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// keyValue copies r out of the bbolt page.
func (r record) keyValue(key string) sdk.KeyValue {
	return sdk.KeyValue{Key: key, Value: bytes.Clone(r.value), Version: r.version, Session: r.session}
}

// Compact implements sdk.Compactor: it drops watch history at and below
// req.Revision.
func (s *Store) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, sdk.ErrClosed
	}
	if req.Revision < 0 || req.Revision > s.rev {
		return nil, fmt.Errorf("%w: compact to revision %d, current %d", sdk.ErrInvalidArgument, req.Revision, s.rev)
	}
	s.watch.CompactLocked(req.Revision)
	return &sdk.CompactResponse{}, nil
}

func checkKey(key string) error { return writecheck.Limits{MaxKeyBytes: maxKeyBytes}.Key(key) }
