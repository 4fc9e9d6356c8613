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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

const (
	// readBufSize is the reader's bufio size: small requests take one read.
	readBufSize = 16 << 10
	// firstChunk is the largest buffer a request payload starts with;
	// larger frames grow it fourfold as their bytes arrive (readPayload),
	// and straight to the frame's size once that is at most eight times
	// what arrived, so memory follows what the peer actually sent (at
	// most eight times it), not what it announced, while the copies of a
	// grown frame stay near a sixth of its size (growing fourfold up to
	// the end copied up to its whole size: 13% of a produce's CPU).
	firstChunk = 64 << 10
	// growStep is the largest buffer recycled between requests
	// (payload.go).
	growStep = 8 << 20
)

// errFrameSize reports a request frame size out of bounds.
var errFrameSize = errors.New("wire: request frame size out of bounds")

// conn is one client connection: a reader goroutine (serve) and a
// processor goroutine it owns. The reader answers a produce or fetch
// itself when nothing else is in flight (servedInline); the processor
// answers everything else, in order.
type conn struct {
	s      *Server
	nc     net.Conn
	info   *ConnInfo
	lc     *ListenerConfig // the listener's; shared, read-only
	log    *slog.Logger
	ctx    context.Context // canceled by close
	cancel context.CancelFunc
	// reqs passes decoded requests from the reader to the processor.
	// INVARIANT: capacity 1, so at most one request waits while one is
	// handled and one is being read.
	reqs chan *Request
	// inflight counts requests decoded and not yet answered; while it is
	// positive the read side is not idle.
	// INVARIANT: the reader answers a request itself only when it raised
	// inflight from 0, so the processor is not writing at the same time
	// and responses leave in request order.
	inflight atomic.Int32
	// answering counts goroutines in serveRequest, checked to stay at
	// most 1 under the invariants build tag.
	answering atomic.Int32
	// lastActive is when (UnixNano) the connection was accepted, a request
	// last arrived or a response was last written; idleness is measured
	// from it.
	lastActive atomic.Int64
	w          *writer
	// peer looks into the socket without reading, for the reader only:
	// whether the client has sent more, or has gone.
	peer *peeker
	// bodyStart and bodyDeadline are set, by the reader only, while it
	// reads a frame body that holds request memory: past bodyDeadline the
	// frame is stalled (see checkStalled). Zero otherwise.
	bodyStart, bodyDeadline time.Time

	closeOnce sync.Once
}

func newConn(s *Server, nc net.Conn, info *ConnInfo, lc *ListenerConfig) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		s: s, nc: nc, info: info, lc: lc, ctx: ctx, cancel: cancel,
		log:  s.log.With("conn", info.ID, "remote", info.Remote.String(), "listener", info.Listener),
		reqs: make(chan *Request, 1),
		w:    newWriter(nc, s.cfg.ZeroCopy, s.cfg.IdleTimeout, &s.stats),
		peer: newPeeker(nc),
	}
	c.lastActive.Store(time.Now().UnixNano()) // idleness counts from the accept
	return c
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
	// Requests the processor never took (it stopped on an error) give
	// their memory back.
	for req := range c.reqs {
		c.done(req)
	}
}

// read decodes requests and queues them until an error.
func (c *conn) read() {
	br := bufio.NewReaderSize(c.nc, readBufSize)
	for {
		payload, reserved, err := c.readFrame(br)
		if err != nil {
			c.logReadErr(err)
			return
		}
		var req *Request
		if c.info.rawSASL.Load() {
			req = rawSASLRequest(payload)
		} else {
			req, err = DecodeRequest(payload)
		}
		if err != nil {
			c.s.pool.release(reserved)
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
		req.reserved = reserved
		n := c.inflight.Add(1)
		req.Received = time.Now()
		c.lastActive.Store(req.Received.UnixNano())
		if n == 1 && servedInline(req) && br.Buffered() == 0 && !c.peer.unread() {
			// Nothing is queued or being answered, so the response order
			// holds, and the client has sent nothing more to read ahead:
			// the request skips the hand-off to the processor, one
			// goroutine wake-up (often a thread's) less per produce and
			// fetch. A client that pipelines keeps the read-ahead.
			c.s.stats.inline.Add(1)
			err := c.serveRequest(req)
			c.done(req)
			if err != nil {
				c.serveFailed(req, err)
				return
			}
			continue
		}
		select {
		case c.reqs <- req:
		case <-c.ctx.Done():
			c.done(req)
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

// done returns a request's memory to the pool once it has been handled or
// dropped. Produce handlers keep nothing of the request once they return
// (the records are copied into the log), so a produce payload is recycled
// for the next request; any other payload is left to the garbage
// collector, as its handler may keep references into it.
func (c *conn) done(req *Request) {
	if req.Key == 0 {
		putPayload(req.payload)
	}
	req.payload = nil
	c.s.pool.release(req.reserved)
	req.reserved = 0
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
	case errors.Is(err, errStalled):
		c.log.Warn("wire: closing connection", "err", err)
	case errors.Is(err, errPeerGone):
		c.log.Debug("wire: connection closed", "err", err)
	case errors.Is(err, errIdle):
		c.log.Info("wire: closing idle connection", "idle", c.s.cfg.IdleTimeout)
	default:
		c.log.Warn("wire: closing connection: read", "err", err)
	}
}

// readFrame reads one request frame and returns its payload and the bytes
// reserved for it in the request pool (its buffer's capacity), which the
// caller must release. The
// size is checked, and the pool waited for, before anything is allocated.
func (c *conn) readFrame(br *bufio.Reader) (payload []byte, reserved int64, err error) {
	c.readDeadline()
	var sz [4]byte
	if err := c.readFull(br, sz[:]); err != nil {
		return nil, 0, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n > c.s.cfg.MaxRequestBytes || n < minHeaderBytes {
		return nil, 0, fmt.Errorf("%w: %d bytes (max %d, min %d)", errFrameSize, n, c.s.cfg.MaxRequestBytes, minHeaderBytes)
	}
	if pre := c.preAuthMax(); pre > 0 && n > pre && !c.info.Authenticated() {
		return nil, 0, fmt.Errorf("%w: %d bytes before authentication (max %d, sasl.server.max.receive.size)", errFrameSize, n, pre)
	}
	// The frame is charged the size of the buffer it will end in.
	charge := int64(payloadCap(int(n)))
	if err := c.s.pool.check(charge); err != nil {
		return nil, 0, err
	}
	// Backpressure: while the pool is spent this connection is not read.
	// A peer that leaves before sending the whole frame is noticed, so it
	// does not keep its connection (and its place under max.connections)
	// until memory frees; a frame already complete in br is still served.
	gone := func() bool { return br.Buffered() < int(n) && c.peer.gone() }
	if err := c.s.pool.acquire(c.ctx, charge, gone); err != nil {
		return nil, 0, err
	}
	if d := c.s.cfg.StalledFrameTimeout; d > 0 && c.s.pool != nil {
		c.bodyStart = time.Now()
		c.bodyDeadline = c.bodyStart.Add(d)
	}
	c.readDeadline() // the wait is not the peer's idleness
	buf, err := readPayload(br, int(n), c.readFull)
	c.bodyStart, c.bodyDeadline = time.Time{}, time.Time{}
	if err != nil {
		c.s.pool.release(charge)
		return nil, 0, err
	}
	// INVARIANT: a payload never outgrows what it is charged.
	if invariant.Enabled {
		invariant.Check(int64(cap(buf)) <= charge, "wire: payload of %d bytes in a buffer of %d, charged %d", n, cap(buf), charge)
	}
	return buf, charge, nil
}

// readPayload reads n bytes with readFull into a buffer that starts at
// most firstChunk long and grows fourfold as bytes arrive (to n at once
// when n is at most eight times what arrived), so a peer that announces a
// large frame and stalls holds little memory. Grown-out buffers are
// recycled (payload.go). A recycled buffer of the frame's size class is
// taken whole at once: it commits no memory that is not already held,
// and a steady stream of large produce requests then reads each straight
// into place (the growth copies were 7% of produce CPU, BENCHMARKS.md).
func readPayload(r io.Reader, n int, readFull func(io.Reader, []byte) error) ([]byte, error) {
	buf := getPooledPayload(n)
	if buf == nil {
		buf = getPayload(min(n, firstChunk))
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			next := min(n, 4*cap(buf))
			if n <= 8*cap(buf) {
				next = n
			}
			grown := append(getPayload(next), buf...)
			putPayload(buf)
			buf = grown
		}
		end := min(cap(buf), n)
		if err := readFull(r, buf[len(buf):end]); err != nil {
			putPayload(buf)
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
			if err := c.checkStalled(); err != nil {
				return err
			}
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

// errStalled reports a frame body that stopped arriving while holding
// request memory others wait for.
var errStalled = errors.New("wire: request frame stalled")

// stallRecheck is how often a frame past its StalledFrameTimeout checks
// whether others now wait for request memory.
const stallRecheck = time.Second

// checkStalled fails if the frame being read is past its
// StalledFrameTimeout while other connections wait for request memory;
// past the timeout without waiters it checks again every stallRecheck.
func (c *conn) checkStalled() error {
	now := time.Now()
	if c.bodyDeadline.IsZero() || now.Before(c.bodyDeadline) {
		return nil
	}
	if w := c.s.pool.stats().waiting; w > 0 {
		return fmt.Errorf("%w: not complete %v after its memory was reserved, while %d connections wait for request memory",
			errStalled, now.Sub(c.bodyStart).Round(time.Millisecond), w)
	}
	c.bodyDeadline = now.Add(stallRecheck)
	return nil
}

// extendIdle reports whether a read timeout is not idleness (a request is
// in progress, or activity happened less than IdleTimeout ago, or there
// is no idle timeout: the timeout was a stall check) and if so re-arms the
// read deadline.
func (c *conn) extendIdle() bool {
	idle := c.s.cfg.IdleTimeout
	switch {
	case idle <= 0:
		c.setReadDeadline(time.Time{})
	case c.inflight.Load() > 0:
		c.setReadDeadline(time.Now().Add(idle))
	default:
		last := time.Unix(0, c.lastActive.Load())
		if time.Since(last) >= idle {
			return false
		}
		c.setReadDeadline(last.Add(idle))
	}
	return true
}

// readDeadline arms the idle timeout for the next read.
func (c *conn) readDeadline() {
	if d := c.s.cfg.IdleTimeout; d > 0 {
		c.setReadDeadline(time.Now().Add(d))
	} else if !c.bodyDeadline.IsZero() {
		c.setReadDeadline(time.Time{})
	}
}

// setReadDeadline sets the socket's read deadline to t (zero: none), or
// to the frame body's stall deadline if that comes first.
func (c *conn) setReadDeadline(t time.Time) {
	if !c.bodyDeadline.IsZero() && (t.IsZero() || c.bodyDeadline.Before(t)) {
		t = c.bodyDeadline
	}
	_ = c.nc.SetReadDeadline(t)
}

// process handles queued requests one at a time and writes their
// responses in order, until the connection closes or a handler or write
// fails.
func (c *conn) process() {
	for req := range c.reqs {
		err := c.serveRequest(req)
		c.done(req)
		if err != nil {
			c.serveFailed(req, err)
			return
		}
	}
}

// servedInline reports whether the reader answers req itself when nothing
// else is in flight: produce and fetch, the requests that carry the data.
// While the reader answers, it does not read, so a client that closes
// during a fetch's long poll or an acks=all produce's wait is noticed when
// the response is written (at the fetch's max wait, or the produce's
// timeout at the latest), as Kafka's purgatory does, not at once. Every
// other request goes through the processor, whose context the reader
// cancels when the client goes away (a JoinGroup can wait for minutes).
func servedInline(req *Request) bool {
	return !req.RawSASL && (req.Key == 0 || req.Key == 1)
}

// serveFailed logs why answering req failed and closes the connection.
func (c *conn) serveFailed(req *Request, err error) {
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
}

func (c *conn) serveRequest(req *Request) error {
	if invariant.Enabled {
		n := c.answering.Add(1)
		invariant.Check(n == 1, "wire: %d goroutines answering on connection %d", n, c.info.ID)
	}
	defer func() {
		if invariant.Enabled {
			c.answering.Add(-1) // before inflight lets the reader answer
		}
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
	if req.RawSASL {
		return c.writeRawSASL(resp)
	}
	if err := c.w.write(req.CorrelationID, flexibleResponseHeader(req, resp), resp); err != nil {
		return err
	}
	if resp.CloseAfter {
		c.log.Info("wire: closing connection after response", "key", req.Key, "correlation_id", req.CorrelationID)
		c.close()
	}
	if resp.Throttle > 0 {
		c.mute(resp.Throttle)
	}
	return nil
}

// writeRawSASL answers a raw SASL token (ConnInfo.SetRawSASL) with the
// response's token as a bare size-prefixed frame, or, when the response
// carries an error, closes the connection without writing.
func (c *conn) writeRawSASL(resp *Response) error {
	r, ok := resp.Msg.(*kmsg.SASLAuthenticateResponse)
	if !ok {
		return fmt.Errorf("wire: a raw SASL token answered with %T", resp.Msg)
	}
	if r.ErrorCode != 0 {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		c.log.Info("wire: closing connection: raw SASL authentication failed", "error_code", r.ErrorCode, "message", msg)
		c.close()
		return nil
	}
	if err := c.w.writeRaw(r.SASLAuthBytes); err != nil {
		return err
	}
	if resp.CloseAfter {
		c.close()
	}
	return nil
}

// mute holds the connection's next request back for d (or until the
// connection ends). Requests already read wait in the queue, so at most
// one read-ahead request is held.
func (c *conn) mute(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
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
