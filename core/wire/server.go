package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/netip"
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
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// request frames the server holds at once, from a frame's size until
	// its request has been handled; while the pool is spent, connections
	// wait before reading their next frame. A frame larger than the pool
	// admits is refused (log line, close). Zero means
	// DefaultQueuedMaxRequestBytes, negative unlimited.
	QueuedMaxRequestBytes int64
	// StalledFrameTimeout closes a connection whose frame body has not
	// fully arrived this long after its request memory was reserved, if
	// other connections are then waiting for request memory (checked
	// again every second after the timeout). It has no Kafka counterpart:
	// it keeps peers that announce frames and stall from holding the pool
	// until IdleTimeout. Zero means DefaultStalledFrameTimeout, negative
	// never.
	StalledFrameTimeout time.Duration
	// MaxConnections is max.connections: a connection accepted while this
	// many are open is closed at once (rate-limited log line). Zero means
	// DefaultMaxConnections(), negative unlimited.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip, the same per remote
	// IP address; zero or negative means unlimited.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides:
	// per-address limits that replace MaxConnectionsPerIP (0 refuses the
	// address).
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// Listener names the listener in ConnInfo ("PLAINTEXT").
	Listener string
	// Logger receives connection errors; nil means slog.Default().
	Logger *slog.Logger
	// ConnFilter, when set, admits or refuses each accepted connection
	// before any byte of it is read (see filter.go).
	ConnFilter ConnFilterFunc
}

// DefaultStalledFrameTimeout is the default StalledFrameTimeout: Kafka
// clients' default request.timeout.ms, after which a client has given up
// on a request whose bytes have not all been sent.
const DefaultStalledFrameTimeout = 30 * time.Second

// DefaultMaxRequestBytes is Kafka's default socket.request.max.bytes.
const DefaultMaxRequestBytes = 100 << 20

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("wire: server closed")

// Stats is a snapshot of a Server's counters.
type Stats struct {
	Conns           int64 // connections open now
	Accepted        int64 // connections accepted in total
	Refused         int64 // connections closed at once by max.connections or max.connections.per.ip
	AcceptErrors    int64 // failed accept calls (EMFILE, ENFILE, ...)
	RequestBytes    int64 // bytes of queued.max.request.bytes reserved now
	RequestWaiters  int64 // connections waiting for request memory now
	Requests        int64 // requests decoded and handed to the Handler
	InlineRequests  int64 // of those, answered by the connection's reader itself
	SendfileCalls   int64 // sendfile(2) calls that moved bytes
	SendfileBytes   int64 // file bytes sent with sendfile
	CopiedFileBytes int64 // file bytes read and copied instead
}

// counters backs Stats.
type counters struct {
	conns, accepted, requests, inline             atomic.Int64
	refused, acceptErrors                         atomic.Int64
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
	pool   *requestPool // nil: unlimited

	refusedLog logLimiter // connections refused by the limits

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	limits    connLimits // counts conns
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
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections()
	}
	if cfg.StalledFrameTimeout == 0 {
		cfg.StalledFrameTimeout = DefaultStalledFrameTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, h: h, log: cfg.Logger, ctx: ctx, cancel: cancel,
		pool:       newRequestPool(cfg.QueuedMaxRequestBytes, int64(cfg.MaxRequestBytes)),
		refusedLog: logLimiter{interval: time.Second},
		listeners:  map[net.Listener]struct{}{},
		conns:      map[*conn]struct{}{},
		limits: connLimits{
			max: cfg.MaxConnections, perIP: cfg.MaxConnectionsPerIP,
			overrides: cfg.MaxConnectionsPerIPOverrides, byIP: map[netip.Addr]int{},
		},
	}
}

// ListenerConfig describes one listener of the server (ServeListener):
// its name, security protocol and TLS.
type ListenerConfig struct {
	// Name is the listener name in ConnInfo ("PLAINTEXT", "INTERNAL").
	Name string
	// Protocol is the security protocol in ConnInfo; empty means
	// PLAINTEXT, or SSL with TLS set.
	Protocol string
	// TLS, when set, makes every connection a TLS server connection: the
	// handshake completes (within TLSHandshakeTimeout) before any request
	// is read, and a failed handshake closes the connection with a log
	// line. Responses are then copied, never sent with sendfile.
	TLS *tls.Config
	// Principal, when set, maps the verified client certificate of a TLS
	// connection to its principal; an error refuses the connection (log
	// line). Without a client certificate the principal stays
	// sdk.Anonymous.
	Principal func(*x509.Certificate) (sdk.Principal, error)
	// PreAuthMaxRequestBytes, when positive, caps request frames until the
	// Handler calls ConnInfo.SetAuthenticated(true) (SASL listeners:
	// sasl.server.max.receive.size); larger ones close the connection.
	PreAuthMaxRequestBytes int32
}

// TLSHandshakeTimeout bounds a TLS handshake on accept.
const TLSHandshakeTimeout = 10 * time.Second

// Serve accepts connections on l until Close, then returns ErrServerClosed.
// It closes l. Serve may be called for several listeners. Its
// connections are plaintext, named Config.Listener.
func (s *Server) Serve(l net.Listener) error {
	return s.ServeListener(l, ListenerConfig{Name: s.cfg.Listener})
}

// ServeListener is Serve for a listener described by lc.
func (s *Server) ServeListener(l net.Listener, lc ListenerConfig) error {
	if lc.Protocol == "" {
		lc.Protocol = "PLAINTEXT"
		if lc.TLS != nil {
			lc.Protocol = "SSL"
		}
	}
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

	// Accept errors (EMFILE and ENFILE when descriptors run out,
	// ECONNABORTED) are retried after a pause that doubles from 5 ms to
	// 1 s, as net/http does, so the loop never spins; the connections
	// already open are served meanwhile. One log line per burst of
	// errors, one when accepting works again.
	backoff := time.Duration(0)
	failures := 0
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			s.stats.acceptErrors.Add(1)
			if failures == 0 {
				s.log.Warn("wire: accept failing; retrying with backoff, open connections are still served",
					"err", err, "open", s.stats.conns.Load())
			}
			failures++
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return ErrServerClosed
			}
			continue
		}
		if failures > 0 {
			s.log.Info("wire: accepting again", "failed_accepts", failures)
		}
		backoff, failures = 0, 0
		s.startConn(nc, &lc)
	}
}

// startConn registers nc and starts its goroutines, or closes it if the
// server is closed.
func (s *Server) startConn(nc net.Conn, lc *ListenerConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return
	}
	ip, hasIP := remoteIP(nc.RemoteAddr())
	if why := s.limits.admitLocked(ip, hasIP, len(s.conns)); why != "" {
		s.stats.refused.Add(1) // before the close: whoever sees the close sees the count
		nc.Close()
		s.refusedLog.log(s.log, slog.LevelWarn, "wire: connection refused: "+why,
			"remote", nc.RemoteAddr().String(), "listener", lc.Name, "open", len(s.conns))
		return
	}
	info := &ConnInfo{
		ID:        s.nextID.Add(1),
		Remote:    nc.RemoteAddr(),
		Local:     nc.LocalAddr(),
		Listener:  lc.Name,
		Protocol:  lc.Protocol,
		Principal: sdk.Anonymous,
	}
	if lc.TLS != nil {
		nc = tls.Server(nc, lc.TLS)
	}
	c := newConn(s, nc, info, lc)
	s.conns[c] = struct{}{}
	s.stats.conns.Add(1)
	s.stats.accepted.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if c.admit() && c.handshake() {
			c.serve()
		} else {
			c.close()
		}
		if cc, ok := s.h.(ConnCloser); ok {
			cc.ConnClosed(c.info)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.limits.releaseLocked(ip, hasIP)
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
	ps := s.pool.stats()
	return Stats{
		Conns:           s.stats.conns.Load(),
		Accepted:        s.stats.accepted.Load(),
		Refused:         s.stats.refused.Load(),
		AcceptErrors:    s.stats.acceptErrors.Load(),
		RequestBytes:    ps.used,
		RequestWaiters:  int64(ps.waiting),
		Requests:        s.stats.requests.Load(),
		InlineRequests:  s.stats.inline.Load(),
		SendfileCalls:   s.stats.sendfileCalls.Load(),
		SendfileBytes:   s.stats.sendfileBytes.Load(),
		CopiedFileBytes: s.stats.copiedFileBytes.Load(),
	}
}
