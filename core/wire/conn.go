package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// readBufSize is the reader's bufio size: small requests take one read.
	readBufSize = 16 << 10
	// growStep bounds the first allocation for a request payload: frames up
	// to it are read into a buffer of their exact size (produce requests
	// are often several MiB, and doubling from a smaller start cost a
	// quarter of the broker's produce CPU in copies and zeroing). Larger
	// frames start there and double as bytes arrive, so memory follows
	// what the peer actually sent.
	growStep = 8 << 20
)

// errFrameSize reports a request frame size out of bounds.
var errFrameSize = errors.New("wire: request frame size out of bounds")

// conn is one client connection: a reader goroutine (serve) and a
// processor goroutine it owns.
type conn struct {
	s      *Server
	nc     net.Conn
	info   *ConnInfo
	log    *slog.Logger
	ctx    context.Context // canceled by close
	cancel context.CancelFunc
	// reqs passes decoded requests from the reader to the processor.
	// INVARIANT: capacity 1, so at most one request waits while one is
	// handled and one is being read.
	reqs chan *Request
	// inflight counts requests decoded and not yet answered; while it is
	// positive the read side is not idle.
	inflight atomic.Int32
	// lastActive is when (UnixNano) a request last arrived or a response
	// was last written; idleness is measured from it.
	lastActive atomic.Int64
	w          *writer

	closeOnce sync.Once
}

func newConn(s *Server, nc net.Conn, info *ConnInfo) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	return &conn{
		s: s, nc: nc, info: info, ctx: ctx, cancel: cancel,
		log:  s.log.With("conn", info.ID, "remote", info.Remote.String(), "listener", info.Listener),
		reqs: make(chan *Request, 1),
		w:    newWriter(nc, s.cfg.ZeroCopy, s.cfg.IdleTimeout, &s.stats),
	}
}

// close cancels the connection's context and closes the socket; safe to
// call from any goroutine, any number of times.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
	})
}

// serve runs the reader in the calling goroutine and the processor in one
// it owns; it returns when both have stopped.
//
// When the read side ends (the peer closed, a bad frame, shutdown), the
// requests already received are still handled, as Kafka does: an acks=0
// producer that writes and closes loses nothing. The context is canceled
// first so that long polls among them end at once.
func (c *conn) serve() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.process()
	}()
	c.read()
	close(c.reqs)
	c.cancel()
	wg.Wait()
	c.close()
}

// read decodes requests and queues them until an error.
func (c *conn) read() {
	br := bufio.NewReaderSize(c.nc, readBufSize)
	for {
		payload, err := c.readFrame(br)
		if err != nil {
			c.logReadErr(err)
			return
		}
		req, err := DecodeRequest(payload)
		if err != nil {
			if req != nil {
				c.log.Warn("wire: closing connection: bad request",
					"key", req.Key, "version", req.Version, "correlation_id", req.CorrelationID, "err", err)
			} else {
				c.log.Warn("wire: closing connection: bad request", "err", err)
			}
			return
		}
		req.Conn = c.info
		req.payload = payload
		c.inflight.Add(1)
		c.lastActive.Store(time.Now().UnixNano())
		select {
		case c.reqs <- req:
		case <-c.ctx.Done():
			return
		}
	}
}

// clientGone reports whether err means the client went away (reset,
// closed mid-frame, or closed before its response was written): ordinary
// for a client, not a warning.
func clientGone(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, io.ErrUnexpectedEOF)
}

// logReadErr logs why reading stopped, quietly for ordinary closes.
func (c *conn) logReadErr(err error) {
	switch {
	case c.ctx.Err() != nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("wire: connection closed", "err", err)
	case clientGone(err):
		c.log.Debug("wire: client disconnected", "err", err)
	case errors.Is(err, errFrameSize):
		c.log.Warn("wire: closing connection: request frame refused", "err", err)
	case errors.Is(err, errIdle):
		c.log.Info("wire: closing idle connection", "idle", c.s.cfg.IdleTimeout)
	default:
		c.log.Warn("wire: closing connection: read", "err", err)
	}
}

// readFrame reads one request frame and returns its payload. The size is
// checked before anything is allocated.
func (c *conn) readFrame(br *bufio.Reader) ([]byte, error) {
	c.readDeadline()
	var sz [4]byte
	if err := c.readFull(br, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n > c.s.cfg.MaxRequestBytes || n < minHeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d, min %d)", errFrameSize, n, c.s.cfg.MaxRequestBytes, minHeaderBytes)
	}
	buf := getPayload(min(int(n), growStep))
	for len(buf) < int(n) {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(int(n), 2*cap(buf))-len(buf))
		}
		end := min(cap(buf), int(n))
		if err := c.readFull(br, buf[len(buf):end]); err != nil {
			return nil, err
		}
		buf = buf[:end]
	}
	return buf, nil
}

// errIdle reports an idle timeout.
var errIdle = errors.New("wire: idle timeout")

// readFull fills p. A read timeout while a request is in progress is not
// idleness: the deadline is extended and reading goes on.
func (c *conn) readFull(r io.Reader, p []byte) error {
	got := 0
	for got < len(p) {
		n, err := r.Read(p[got:])
		got += n
		if err == nil || got == len(p) {
			continue
		}
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			if !c.extendIdle() {
				return errIdle
			}
		case errors.Is(err, io.EOF) && got > 0:
			return io.ErrUnexpectedEOF
		default:
			return err
		}
	}
	return nil
}

// extendIdle reports whether a read timeout is not idleness (a request is
// in progress, or activity happened less than IdleTimeout ago) and if so
// re-arms the read deadline.
func (c *conn) extendIdle() bool {
	idle := c.s.cfg.IdleTimeout
	if c.inflight.Load() > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(idle))
		return true
	}
	if last := time.Unix(0, c.lastActive.Load()); time.Since(last) < idle {
		_ = c.nc.SetReadDeadline(last.Add(idle))
		return true
	}
	return false
}

// readDeadline arms the idle timeout for the next read.
func (c *conn) readDeadline() {
	if d := c.s.cfg.IdleTimeout; d > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(d))
	}
}

// process handles queued requests one at a time and writes their
// responses in order, until the connection closes or a handler or write
// fails.
func (c *conn) process() {
	for req := range c.reqs {
		err := c.serveRequest(req)
		if req.Key == 0 {
			// Produce handlers keep nothing of the request once they
			// return (the records are copied into the log), so its
			// buffer can serve the next request.
			putPayload(req.payload)
		}
		if err != nil {
			switch {
			case c.ctx.Err() != nil:
			case clientGone(err):
				c.log.Debug("wire: client disconnected before its response", "key", req.Key,
					"correlation_id", req.CorrelationID, "err", err)
			default:
				c.log.Warn("wire: closing connection", "key", req.Key, "version", req.Version,
					"correlation_id", req.CorrelationID, "err", err)
			}
			c.close()
			return
		}
	}
}

func (c *conn) serveRequest(req *Request) error {
	defer func() {
		c.lastActive.Store(time.Now().UnixNano())
		c.inflight.Add(-1)
	}()
	c.s.stats.requests.Add(1)
	resp, err := c.callHandler(req)
	if err != nil || resp == nil {
		return err
	}
	if resp.Done != nil {
		defer resp.Done()
	}
	if err := c.w.write(req.CorrelationID, flexibleResponseHeader(req, resp), resp); err != nil {
		return err
	}
	if resp.CloseAfter {
		c.log.Info("wire: closing connection after response", "key", req.Key, "correlation_id", req.CorrelationID)
		c.close()
	}
	return nil
}

// callHandler calls the Handler, turning a panic into an error so one bad
// request closes its connection, not the broker.
func (c *conn) callHandler(req *Request) (resp *Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, fmt.Errorf("wire: handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	return c.s.h.Handle(c.ctx, req)
}

// flexibleResponseHeader reports whether the response header is v1 (with a
// tag section): for flexible versions, but never for ApiVersions.
func flexibleResponseHeader(req *Request, resp *Response) bool {
	switch {
	case req.Key == apiVersionsKey:
		return false
	case resp.Msg != nil:
		return resp.Msg.IsFlexible()
	default:
		return req.Body != nil && req.Body.IsFlexible()
	}
}
