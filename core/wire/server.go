package wire

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/plugins/sdk"
)

// Handler serves decoded requests. Handle is called from one goroutine per
// connection, one request at a time, in request order; different
// connections call it concurrently.
type Handler interface {
	// Handle serves one decoded request. It returns the response to send,
	// nil for none (acks=0 produce), or a Go error, which closes the
	// connection (logged). ctx is canceled when the connection closes or the
	// server shuts down. Handle must not call Server.Close.
	Handle(ctx context.Context, req *Request) (*Response, error)
}

// ConnCloser is an optional interface of a Handler: ConnClosed is called
// once per connection after it closed and its last Handle call returned,
// so per-connection state (a SASL conversation) can be released. It runs
// on the connection's goroutine; Server.Close waits for it.
type ConnCloser interface {
	ConnClosed(info *ConnInfo)
}

// Response is what a Handler answers. Exactly one of Msg and Frame is set.
type Response struct {
	// Msg is encoded at Msg.GetVersion().
	Msg kmsg.Response
	// Frame is a pre-built body (zero-copy fetch, see FetchFrame).
	Frame *Frame
	// Done, if set, is called once after the response is written or
	// dropped (to release file references).
	Done func()
	// CloseAfter closes the connection once the response is written, as
	// Kafka does after a failed SASL authentication: the client reads the
	// error, then sees the connection end.
	CloseAfter bool
	// Throttle mutes the connection: after writing the response the
	// server reads no further request of the connection for this long
	// (client quotas, KIP-219; the response carries the same time, so the
	// client waits too).
	Throttle time.Duration
}

// Config configures a Server.
type Config struct {
	// MaxRequestBytes is socket.request.max.bytes: larger request frames are
	// refused before allocation (log line, close). Zero means 100 MiB.
	MaxRequestBytes int32
	// ZeroCopy sends file ranges with sendfile on TCP connections; false
	// reads (pread) and copies them.
	ZeroCopy bool
	// IdleTimeout is connections.max.idle.ms: a connection that neither
	// sends a request nor accepts response bytes for this long, and has no
	// request in progress, is closed. Zero means never.
	IdleTimeout time.Duration
	// Listener names the listener in ConnInfo ("PLAINTEXT").
	Listener string
	// Logger receives connection errors; nil means slog.Default().
	Logger *slog.Logger
	// ConnFilter, when set, admits or refuses each accepted connection
	// before any byte of it is read (see filter.go).
	ConnFilter ConnFilterFunc
}

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes.
const DefaultMaxRequestBytes = 100 << 20

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("wire: server closed")

// Stats is a snapshot of a Server's counters.
type Stats struct {
	Conns           int64 // connections open now
	Accepted        int64 // connections accepted in total
	Requests        int64 // requests decoded and handed to the Handler
	SendfileCalls   int64 // sendfile(2) calls that moved bytes
	SendfileBytes   int64 // file bytes sent with sendfile
	CopiedFileBytes int64 // file bytes read and copied instead
}

// counters backs Stats.
type counters struct {
	conns, accepted, requests                     atomic.Int64
	sendfileCalls, sendfileBytes, copiedFileBytes atomic.Int64
}

// Server accepts Kafka connections and serves them with a Handler.
type Server struct {
	cfg    Config
	h      Handler
	log    *slog.Logger
	ctx    context.Context // canceled by Close; parent of every conn's ctx
	cancel context.CancelFunc
	stats  counters
	nextID atomic.Uint64

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	// wg counts Serve calls and connection goroutines.
	// INVARIANT: wg.Add happens only under mu with closed == false.
	wg sync.WaitGroup
}

// NewServer returns a Server; call Serve to accept connections.
func NewServer(cfg Config, h Handler) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, h: h, log: cfg.Logger, ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
	}
}

// Serve accepts connections on l until Close, then returns ErrServerClosed.
// It closes l. Serve may be called for several listeners.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer l.Close()

	backoff := time.Duration(0)
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Temporary (EMFILE, ECONNABORTED): back off and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("wire: accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		s.startConn(nc)
	}
}

// startConn registers nc and starts its goroutines, or closes it if the
// server is closed.
func (s *Server) startConn(nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return
	}
	info := &ConnInfo{
		ID:        s.nextID.Add(1),
		Remote:    nc.RemoteAddr(),
		Local:     nc.LocalAddr(),
		Listener:  s.cfg.Listener,
		Principal: sdk.Anonymous,
	}
	c := newConn(s, nc, info)
	s.conns[c] = struct{}{}
	s.stats.conns.Add(1)
	s.stats.accepted.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if c.admit() {
			c.serve()
		}
		if cc, ok := s.h.(ConnCloser); ok {
			cc.ConnClosed(c.info)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.stats.conns.Add(-1)
	}()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every listener and connection, cancels the
// contexts of requests in progress and waits for every goroutine of the
// server (including Serve calls) to return. It is safe to call twice.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.cancel()
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Conns:           s.stats.conns.Load(),
		Accepted:        s.stats.accepted.Load(),
		Requests:        s.stats.requests.Load(),
		SendfileCalls:   s.stats.sendfileCalls.Load(),
		SendfileBytes:   s.stats.sendfileBytes.Load(),
		CopiedFileBytes: s.stats.copiedFileBytes.Load(),
	}
}
