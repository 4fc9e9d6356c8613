package zookeeper

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/vltava/vltava/plugins/metastore/internal/writecheck"
	"github.com/vltava/vltava/plugins/sdk"
)

// Store is an sdk.MetadataStore on a ZooKeeper ensemble.
type Store struct {
	cfg    *parsed
	conn   *zk.Conn
	acl    []zk.ACL
	lim    writecheck.Limits
	logger *slog.Logger
	p      paths

	closed  chan struct{}
	pruneCh chan int64 // latest revision, for the pruner; buffered 1

	mu       sync.Mutex
	isClosed bool
	wg       sync.WaitGroup // background loops and request goroutines; Add under mu
	sessions map[sdk.SessionID]*localSession
	ending   map[sdk.SessionID]bool // expired locally, end not yet written
	ended    map[sdk.SessionID]bool // ended by this store: KeepAlive fails
	// disconnected: the client lost its connection to ZooKeeper and has
	// not got its session back yet. Local TTLs do not run out meanwhile
	// (see onEvent).
	disconnected bool
}

type paths struct {
	root, rev, kv, log, compact, sessions, live string
}

func newPaths(root string) paths {
	j := func(s string) string { return path.Join(root, s) }
	return paths{root: root, rev: j("rev"), kv: j("kv"), log: j("log"), compact: j("compact"), sessions: j("sessions"), live: j("live")}
}

func (p paths) key(k string) string             { return p.kv + "/" + encodeName(k) }
func (p paths) logEntry(rev int64) string       { return p.log + "/" + logName(rev) }
func (p paths) session(id sdk.SessionID) string { return fmt.Sprintf("%s/%d", p.sessions, id) }
func (p paths) owned(id sdk.SessionID, k string) string {
	return p.session(id) + "/" + encodeName(k)
}
func (p paths) liveNode(id sdk.SessionID) string { return p.live + "/" + liveName(id) }

var (
	_ sdk.MetadataStore = (*Store)(nil)
	_ sdk.Compactor     = (*Store)(nil)
)

// Open connects, authenticates, creates the store's znodes under the
// chroot if they are missing, and starts the session loops.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Store, error) {
	p, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Store{
		cfg: p, logger: logger, p: newPaths(p.chroot),
		lim:      writecheck.Limits{MaxKeyBytes: maxKeyBytes, MaxValueBytes: p.MaxValueBytes},
		closed:   make(chan struct{}),
		pruneCh:  make(chan int64, 1),
		sessions: make(map[sdk.SessionID]*localSession),
		ending:   make(map[sdk.SessionID]bool),
		ended:    make(map[sdk.SessionID]bool),
		acl:      zk.WorldACL(zk.PermAll),
	}
	dialer := zk.WithDialer(net.DialTimeout)
	if p.tls != nil {
		dialer = zk.WithDialer(tlsDialer(p.tls))
	}
	conn, _, err := zk.Connect(p.servers, p.SessionTimeout, zk.WithLogger(zkLogger{logger}), zk.WithEventCallback(s.onEvent), dialer)
	if err != nil {
		return nil, fmt.Errorf("zookeeper store: connect %s: %v: %w", cfg.Connect, err, sdk.ErrUnavailable)
	}
	s.conn = conn
	if p.Digest != "" {
		user, pass, _ := strings.Cut(p.Digest, ":")
		s.acl = zk.DigestACL(zk.PermAll, user, pass)
		if err := conn.AddAuth("digest", []byte(p.Digest)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zookeeper store: digest auth: %v: %w", err, sdk.ErrUnavailable)
		}
	}
	if err := s.run(ctx, "open", s.initLayout); err != nil {
		s.Close()
		return nil, err
	}
	s.mu.Lock()
	s.wg.Add(3)
	s.mu.Unlock()
	go s.expiryLoop()
	go s.orphanLoop()
	go s.pruneLoop()
	return s, nil
}

// initLayout creates the chroot and the store's znodes that are missing.
func (s *Store) initLayout(context.Context) error {
	var dirs []string
	for d := s.p.root; d != "/"; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	for _, d := range append(dirs, s.p.rev, s.p.kv, s.p.log, s.p.sessions, s.p.live) {
		if _, err := s.conn.Create(d, nil, 0, s.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if _, err := s.conn.Create(s.p.compact, encodeRev(0), 0, s.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", s.p.compact, err)
	}
	return nil
}

func tlsDialer(cfg *tls.Config) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		d := &net.Dialer{Timeout: timeout}
		return tls.DialWithDialer(d, network, address, cfg)
	}
}

// zkLogger sends the client library's log lines to slog at debug level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zookeeper client: " + fmt.Sprintf(format, args...))
}

// onEvent runs on the client's event goroutine. When ZooKeeper expires
// this client's session, every ephemeral session znode it created is
// gone: the store sessions it granted are over.
//
// While the client is disconnected, local sessions do not expire: a
// keep-alive can not reach ZooKeeper, whether the broker lives or not.
// When the client gets its ZooKeeper session back, every local session
// gets a full TTL again, as etcd extends its leases after an outage: a
// store outage alone ends no session, and a broker whose keep-alives
// resume keeps its registration (core/cluster leads on through a
// whole-store outage). A ZooKeeper session that expired meanwhile ends
// them all instead (StateExpired).
func (s *Store) onEvent(ev zk.Event) {
	if ev.Type == zk.EventSession {
		switch ev.State {
		case zk.StateDisconnected:
			s.mu.Lock()
			s.disconnected = true
			s.mu.Unlock()
		case zk.StateHasSession:
			s.mu.Lock()
			was := s.disconnected
			s.disconnected = false
			n := 0
			if was {
				now := time.Now()
				for _, ls := range s.sessions {
					ls.deadline = now.Add(ls.ttl)
					n++
				}
			}
			s.mu.Unlock()
			if n > 0 {
				s.logger.Info("zookeeper store: reconnected to ZooKeeper; local sessions get a full TTL again", "sessions", n)
			}
		}
	}
	if ev.Type == zk.EventSession && ev.State == zk.StateExpired {
		s.mu.Lock()
		n := len(s.sessions)
		for id := range s.sessions {
			s.ended[id] = true
			delete(s.sessions, id)
		}
		s.mu.Unlock()
		if n > 0 {
			s.logger.Warn("zookeeper store: ZooKeeper expired this client's session; its store sessions are over", "sessions", n)
		}
	}
}

// Close closes the ZooKeeper session (ZooKeeper deletes this store's
// session znodes; another store instance then ends those sessions) and
// waits for the store's goroutines.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return nil
	}
	s.isClosed = true
	close(s.closed)
	s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
	}
	s.wg.Wait()
	return nil
}

var errClosed = fmt.Errorf("zookeeper store: %w", sdk.ErrClosed)

// run runs f, the ZooKeeper calls of one request, on a goroutine of its
// own and waits for it, for ctx, or for request.timeout (then
// ErrUnavailable). The client library's calls take no context; an
// abandoned f ends when its call returns (at the latest when Close closes
// the connection), and f checks its ctx between calls.
func (s *Store) run(ctx context.Context, op string, f func(ctx context.Context) error) error {
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return errClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		done <- f(rctx)
	}()
	select {
	case err := <-done:
		return s.mapErr(ctx, op, err)
	case <-rctx.Done():
		return s.mapErr(ctx, op, rctx.Err())
	}
}

// mapErr turns what a request ended with into the contract's errors.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{sdk.ErrNotFound, sdk.ErrVersionMismatch, sdk.ErrSessionExpired, sdk.ErrCompacted, sdk.ErrInvalidArgument, sdk.ErrClosed} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	select {
	case <-s.closed:
		return errClosed
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("zookeeper store: %s: not authorized for the store's znodes (check auth.digest): %w", op, sdk.ErrUnavailable)
	}
	return fmt.Errorf("zookeeper store: %s: %v: %w", op, err, sdk.ErrUnavailable)
}

// readRev returns the store revision: the data version of the rev znode.
func (s *Store) readRev() (int64, int32, error) {
	_, st, err := s.conn.Exists(s.p.rev)
	if err != nil {
		return 0, 0, err
	}
	return int64(st.Version), st.Version, nil
}

// Get reads one key after a sync, so it sees every write that returned
// before it started, through any server.
func (s *Store) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	if err := s.lim.Key(req.Key); err != nil {
		return nil, err
	}
	var out *sdk.GetResponse
	err := s.run(ctx, "get", func(context.Context) error {
		if _, err := s.conn.Sync(s.p.root); err != nil {
			return err
		}
		data, _, err := s.conn.Get(s.p.key(req.Key))
		if errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zookeeper store: %q: %w", req.Key, sdk.ErrNotFound)
		}
		if err != nil {
			return err
		}
		rec, err := decodeRecord(data)
		if err != nil {
			return err
		}
		rev, _, err := s.readRev() // after the key, so rev ≥ its version
		if err != nil {
			return err
		}
		out = &sdk.GetResponse{KeyValue: sdk.KeyValue{Key: req.Key, Value: rec.value, Version: rec.version, Session: rec.session}, Revision: rev}
		return nil
	})
	return out, err
}

// List reads the keys with the prefix: the revision before and after the
// reads must agree, or it reads again (a write in between).
func (s *Store) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	var out *sdk.ListResponse
	err := s.run(ctx, "list", func(ctx context.Context) error {
		if _, err := s.conn.Sync(s.p.root); err != nil {
			return err
		}
		for ctx.Err() == nil {
			before, _, err := s.readRev()
			if err != nil {
				return err
			}
			kvs, err := s.readKeys(req.Prefix)
			if err != nil {
				return err
			}
			after, _, err := s.readRev()
			if err != nil {
				return err
			}
			if before == after {
				out = &sdk.ListResponse{KVs: kvs, Revision: after}
				return nil
			}
		}
		return ctx.Err()
	})
	return out, err
}

// readKeys reads every key with the prefix, 16 reads in flight.
func (s *Store) readKeys(prefix string) ([]sdk.KeyValue, error) {
	names, _, err := s.conn.Children(s.p.kv)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, n := range names {
		k, err := decodeName(n)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	kvs := make([]sdk.KeyValue, len(keys))
	found := make([]bool, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			data, _, err := s.conn.Get(s.p.key(k))
			if errors.Is(err, zk.ErrNoNode) {
				return // deleted meanwhile; the revision check retries
			}
			if err == nil {
				var rec record
				if rec, err = decodeRecord(data); err == nil {
					kvs[i], found[i] = sdk.KeyValue{Key: k, Value: rec.value, Version: rec.version, Session: rec.session}, true
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]sdk.KeyValue, 0, len(kvs))
	for i := range kvs {
		if found[i] {
			out = append(out, kvs[i])
		}
	}
	slices.SortFunc(out, func(a, b sdk.KeyValue) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}
