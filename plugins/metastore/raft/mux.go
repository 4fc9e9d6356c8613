package raft

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Every connection to the quorum port starts with one tag byte naming
// the protocol that follows (see doc.go).
const (
	tagRaft    byte = 'R' // hashicorp/raft's msgpack RPCs
	tagForward byte = 'F' // forwarding protocol: HTTP/1.1 with gob bodies
)

// tagTimeout bounds the wait for a new connection's tag byte.
const tagTimeout = 5 * time.Second

var errMuxClosed = errors.New("raft: quorum listener closed")

// mux owns the quorum listener and splits its connections by tag into
// two net.Listeners: one for raft's transport, one for the forwarding
// server. It tracks every accepted connection, closes them all on close
// and waits until their handlers have let go of them, so no handler of
// either protocol outlives the Store. (hashicorp/raft answers heartbeats
// on the transport's connection goroutine, which Raft.Shutdown does not
// wait for: one that passed the shutdown check would otherwise write the
// term to a store already closed and panic, hashicorp/raft#717.)
type mux struct {
	ln        net.Listener
	advertise net.Addr
	log       *slog.Logger
	tls       *tls.Config // nil: plaintext; else every connection is a TLS server first

	raftL *chanListener
	fwdL  *chanListener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and the tag readers
	// held counts accepted connections whose owner (a tag reader, raft's
	// connection handler, the forwarding server) has not closed them.
	held sync.WaitGroup
}

// handlerWait bounds how long close waits for connection handlers to
// return once their connections are closed.
const handlerWait = 5 * time.Second

func newMux(ln net.Listener, advertise net.Addr, log *slog.Logger, serverTLS *tls.Config) *mux {
	m := &mux{ln: ln, advertise: advertise, log: log, tls: serverTLS, conns: make(map[net.Conn]struct{})}
	m.raftL = newChanListener(advertise)
	m.fwdL = newChanListener(advertise)
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

// acceptLoop is owned by the mux: it returns when close closes ln.
func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		tc := &trackedConn{Conn: conn, m: m}
		if !m.track(tc) {
			conn.Close()
			return
		}
		m.wg.Add(1)
		go m.route(tc)
	}
}

func (m *mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.conns[c] = struct{}{}
	m.held.Add(1)
	return true
}

// trackedConn leaves the mux's set when closed, so the set holds only
// open connections.
type trackedConn struct {
	net.Conn
	m    *mux
	once sync.Once
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.m.mu.Lock()
		delete(c.m.conns, c)
		c.m.mu.Unlock()
		c.m.held.Done()
	})
	return err
}

// route completes the TLS handshake, if any, reads the tag byte and
// hands the connection on.
func (m *mux) route(conn net.Conn) {
	defer m.wg.Done()
	if m.tls != nil {
		tc := tls.Server(conn, m.tls)
		ctx, cancel := context.WithTimeout(context.Background(), tagTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			m.log.Warn("raft: refusing quorum connection: TLS handshake failed (a peer needs a certificate from the configured CA)",
				"remote", conn.RemoteAddr().String(), "err", err)
			conn.Close()
			return
		}
		conn = tc
	}
	var tag [1]byte
	conn.SetReadDeadline(time.Now().Add(tagTimeout))
	if _, err := conn.Read(tag[:]); err != nil {
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	var l *chanListener
	switch tag[0] {
	case tagRaft:
		l = m.raftL
	case tagForward:
		l = m.fwdL
	default:
		m.log.Warn("raft: closing quorum connection with an unknown protocol tag", "remote", conn.RemoteAddr().String(), "tag", tag[0])
		conn.Close()
		return
	}
	if !l.deliver(conn) {
		conn.Close()
	}
}

// close stops accepting, closes every accepted connection and waits for
// the mux's goroutines and for every connection's owner to have closed it
// (its handler has returned), at most handlerWait.
func (m *mux) close() {
	m.mu.Lock()
	m.closed = true
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()
	m.ln.Close()
	m.raftL.Close()
	m.fwdL.Close()
	for c := range conns {
		c.(*trackedConn).Conn.Close()
	}
	m.wg.Wait()
	released := make(chan struct{})
	go func() {
		m.held.Wait()
		close(released)
	}()
	t := time.NewTimer(handlerWait)
	defer t.Stop()
	select {
	case <-released:
	case <-t.C:
		m.log.Warn("raft: quorum connection handlers still running after close", "waited", handlerWait)
	}
}

// chanListener is a net.Listener fed by the mux.
type chanListener struct {
	addr   net.Addr
	ch     chan net.Conn
	once   sync.Once
	doneCh chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), doneCh: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.doneCh:
		return false
	}
}

// Accept implements net.Listener.
func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.doneCh:
		return nil, errMuxClosed
	}
}

// Close implements net.Listener.
func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.doneCh) })
	return nil
}

// Addr implements net.Listener.
func (l *chanListener) Addr() net.Addr { return l.addr }

// raftStream is the raft transport's StreamLayer: it accepts from the
// mux and dials other voters with the raft tag.
type raftStream struct {
	*chanListener
	d dialer
}

var _ hraft.StreamLayer = raftStream{}

// Dial implements raft.StreamLayer.
func (r raftStream) Dial(addr hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return r.d.dialTagged(string(addr), timeout, tagRaft)
}

// DialFunc opens a TCP connection to another node's quorum address
// within timeout (see Config.Dial).
type DialFunc func(addr string, timeout time.Duration) (net.Conn, error)

// dialer opens connections to other nodes' quorum ports.
type dialer struct {
	dial DialFunc    // nil: TCP
	tls  *tls.Config // nil: plaintext
}

// dialTagged connects to addr (with TLS, if configured, the handshake
// done within timeout) and sends the tag byte.
func (d dialer) dialTagged(addr string, timeout time.Duration, tag byte) (net.Conn, error) {
	dial := d.dial
	if dial == nil {
		dial = func(addr string, timeout time.Duration) (net.Conn, error) {
			return net.DialTimeout("tcp", addr, timeout)
		}
	}
	conn, err := dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		cfg := d.tls
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("raft: TLS handshake with %s: %w", addr, err)
		}
		tc.SetDeadline(time.Time{})
		conn = tc
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte{tag}); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, nil
}
