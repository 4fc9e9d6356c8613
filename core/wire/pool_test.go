package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitStats polls the server's stats until cond holds (5 s hang guard).
func waitStats(t *testing.T, s *Server, what string, cond func(Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond(s.Stats()) {
			return
		}
	}
	t.Fatalf("never %s; stats %+v", what, s.Stats())
}

// While the request pool is spent, a connection with a large frame waits
// (no error, nothing read), a small request of another client is still
// served, and the waiting frame is read and handled as soon as memory is
// returned.
func TestPoolBackpressureResumes(t *testing.T) {
	const mib = 1 << 20
	release := make(chan struct{})
	var produced atomic.Int32
	inner := &apiHandler{}
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		p, ok := req.Body.(*kmsg.ProduceRequest)
		if !ok {
			return inner.Handle(ctx, req)
		}
		if produced.Add(1) == 1 {
			select { // the first produce holds its memory
			case <-release:
			case <-ctx.Done(): // the test failed: let Close finish
			}
		}
		resp := p.ResponseKind().(*kmsg.ProduceResponse)
		return &Response{Msg: resp}, nil
	})
	// Pool of 3 MiB, frames up to 2 MiB: large frames may hold 2.25 MiB
	// together, so two 2 MiB frames cannot be in memory at once.
	s, addr, _ := startServer(t, Config{MaxRequestBytes: 2 * mib, QueuedMaxRequestBytes: 3 * mib}, h)

	a := dial(t, addr)
	if _, err := a.Write(produceFrame(2*mib, 1)); err != nil {
		t.Fatal(err)
	}
	waitStats(t, s, "handling the first frame", func(st Stats) bool { return produced.Load() == 1 })

	b := dial(t, addr)
	go b.Write(produceFrame(2*mib, 2)) // may block: the server is not reading b
	waitStats(t, s, "waiting for request memory", func(st Stats) bool { return st.RequestWaiters == 1 })

	// Another client's small request still goes through.
	c := dial(t, addr)
	if _, err := c.Write(frame(metadataRequest(9, "x"), 7, "c")); err != nil {
		t.Fatal(err)
	}
	var md kmsg.MetadataResponse
	md.Version = 9
	if corr := decodeResponse(t, readResponse(t, c), &md, true); corr != 7 {
		t.Fatalf("metadata correlation id %d", corr)
	}
	// The waiting frame is not handled while the pool is spent.
	time.Sleep(100 * time.Millisecond)
	if n := produced.Load(); n != 1 {
		t.Fatalf("%d produce requests handled while the pool was spent, want 1", n)
	}
	if st := s.Stats(); st.RequestBytes != int64(payloadCap(len(produceFrame(2*mib, 1))-4)) || st.RequestWaiters != 1 {
		t.Fatalf("stats %+v: want the first frame reserved and one waiter", st)
	}

	close(release)
	for i, conn := range []net.Conn{a, b} {
		var pr kmsg.ProduceResponse
		pr.Version = 7
		if corr := decodeResponse(t, readResponse(t, conn), &pr, false); corr != int32(i+1) {
			t.Fatalf("produce %d: correlation id %d", i+1, corr)
		}
	}
	waitStats(t, s, "returning all request memory", func(st Stats) bool { return st.RequestBytes == 0 && st.RequestWaiters == 0 })
}

// A frame larger than the pool could ever hold is refused with a log line
// and a clean close, not waited for.
func TestFrameLargerThanPoolRefused(t *testing.T) {
	const mib = 1 << 20
	s, addr, logs := startServer(t, Config{MaxRequestBytes: 4 * mib, QueuedMaxRequestBytes: 2 * mib}, &apiHandler{})
	c := dial(t, addr)
	if _, err := c.Write(produceFrame(3*mib, 1)[:64<<10]); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	logs.waitFor(t, "more than the request memory pool admits")
	if st := s.Stats(); st.RequestBytes != 0 || st.RequestWaiters != 0 {
		t.Fatalf("stats %+v after refusing", st)
	}
}

// The pool's admission rules, without sockets: small frames may use the
// reserve and pass waiting large frames; large frames are admitted in
// arrival order; a waiter whose context ends leaves nothing reserved.
func TestRequestPoolOrder(t *testing.T) {
	const mib = 1 << 20
	p := newRequestPool(8*mib, 4*mib) // reserve 2 MiB: large frames share 6 MiB
	ctx := context.Background()
	if err := p.check(6*mib + 1); err == nil {
		t.Fatal("a large frame over pool minus reserve was accepted")
	}
	if err := p.check(6 * mib); err != nil {
		t.Fatal(err)
	}
	mustAcquire := func(n int64) {
		t.Helper()
		if err := p.acquire(ctx, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustAcquire(5 * mib) // large, 5 of 6
	// Large waiters, in order: 3 MiB then 1.5 MiB.
	wait := func(n int64) <-chan error {
		ch := make(chan error, 1)
		before := p.stats().waiting
		go func() { ch <- p.acquire(ctx, n, nil) }()
		for p.stats().waiting == before {
			time.Sleep(time.Millisecond)
		}
		return ch
	}
	big := wait(3 * mib)
	second := wait(mib + mib/2)
	// A small frame fits in the reserve although large frames wait.
	mustAcquire(mib)
	mustAcquire(mib)
	if got := p.stats(); got.used != 7*mib || got.waiting != 2 {
		t.Fatalf("stats %+v", got)
	}
	// Freeing 1 MiB of small frames would fit the second large waiter
	// (5+1+1.5 <= 8 but large frames may only hold 6): nothing moves.
	p.release(mib)
	select {
	case <-second:
		t.Fatal("second large waiter admitted ahead of the first")
	case <-time.After(20 * time.Millisecond):
	}
	p.release(5 * mib) // used 1 MiB: the first large waiter (3) goes, then the second (1.5)
	for _, ch := range []<-chan error{big, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := p.stats(); got.used != mib+3*mib+mib+mib/2 || got.waiting != 0 {
		t.Fatalf("stats %+v", got)
	}
	// A waiter that gives up reserves nothing.
	cctx, cancel := context.WithCancel(ctx)
	ch := make(chan error, 1)
	go func() { ch <- p.acquire(cctx, 4*mib, nil) }()
	for p.stats().waiting == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after cancel: %v", err)
	}
	p.release(mib + 3*mib + mib + mib/2)
	if got := p.stats(); got.used != 0 || got.waiting != 0 {
		t.Fatalf("stats %+v after releasing everything", got)
	}
}

// A payload's buffer grows with the bytes that arrived, not with the
// size announced: a peer that announces 64 MiB and sends 300 KiB never
// gets a buffer of more than eight times that (fourfold growth, and
// straight to the frame's size once that is within eightfold).
func TestReadPayloadGrowsWithArrival(t *testing.T) {
	const sent = 300 << 10
	var largest int
	got := 0
	readFull := func(_ io.Reader, p []byte) error {
		largest = max(largest, got+len(p))
		if got+len(p) > sent {
			return io.ErrUnexpectedEOF
		}
		got += len(p)
		return nil
	}
	if _, err := readPayload(nil, 64<<20, readFull); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("readPayload: %v", err)
	}
	if largest > 8*sent+firstChunk {
		t.Fatalf("buffer grew to %d bytes for %d bytes received", largest, sent)
	}
	// And a complete frame reads whole.
	got = 0
	buf, err := readPayload(nil, sent, readFull)
	if err != nil || len(buf) != sent {
		t.Fatalf("readPayload of a whole frame: %d bytes, %v", len(buf), err)
	}
}

// A frame whose size class has a recycled buffer free is read straight
// into it in one piece: no growth and no copy of what arrived.
func TestReadPayloadTakesRecycledBufferWhole(t *testing.T) {
	const n = 1<<20 - 100
	for range 20 { // sync.Pool may drop a buffer (it does at random under -race)
		putPayload(make([]byte, 0, 1<<20))
		var calls []int
		readFull := func(_ io.Reader, p []byte) error {
			calls = append(calls, len(p))
			return nil
		}
		buf, err := readPayload(nil, n, readFull)
		if err != nil || len(buf) != n {
			t.Fatalf("readPayload: %d bytes, %v", len(buf), err)
		}
		if len(calls) == 1 && calls[0] == n && cap(buf) == 1<<20 {
			return
		}
	}
	t.Fatal("a frame with a recycled buffer of its class free was never read into it whole")
}

// A client that pipelines requests and closes its connection while the
// first is being handled leaves nothing reserved once the handler returns:
// the request being handled, the one queued behind it and the one being
// read all give their memory back. The requests are metadata requests,
// which the processor answers while the reader reads ahead (the reader
// may answer a produce itself, and then reads nothing meanwhile).
func TestPoolReleasedOnClose(t *testing.T) {
	const kib = 1 << 10
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done(): // the test failed: let Close finish
		}
		return &Response{Msg: req.Body.(*kmsg.MetadataRequest).ResponseKind()}, nil
	})
	s, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	var all []byte
	for i := range 3 {
		all = append(all, metadataFrame(300*kib, int32(i))...)
	}
	three := 3 * int64(payloadCap(len(all)/3-4))              // charged by buffer size
	all = append(all, metadataFrame(300*kib, 9)[:100*kib]...) // a fourth, cut short
	if _, err := c.Write(all); err != nil {
		t.Fatal(err)
	}
	<-started
	waitStats(t, s, "reserving three frames", func(st Stats) bool { return st.RequestBytes == three })
	c.Close()
	close(release)
	waitStats(t, s, "returning every reservation", func(st Stats) bool {
		return st.Conns == 0 && st.RequestBytes == 0 && st.RequestWaiters == 0
	})
}

// A connection waiting for request memory whose peer leaves before sending
// its whole frame is closed within a few seconds, freeing its place under
// max.connections; one whose frame arrived whole before the peer closed
// (an acks=0 producer that writes and leaves) is still served once memory
// frees.
func TestWaitingPeerLeaves(t *testing.T) {
	const mib = 1 << 20
	release := make(chan struct{})
	handled := make(chan int32, 8)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		handled <- req.CorrelationID
		if req.CorrelationID == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil, nil
	})
	s, addr, _ := startServer(t, Config{MaxRequestBytes: mib, QueuedMaxRequestBytes: mib}, h)
	a := dial(t, addr)
	if _, err := a.Write(produceFrame(mib, 1)); err != nil { // holds (almost) the whole pool
		t.Fatal(err)
	}
	if id := <-handled; id != 1 {
		t.Fatalf("handled %d first", id)
	}
	// b announces a frame, sends part of it and leaves; c sends a whole
	// small frame and leaves.
	b := dial(t, addr)
	if _, err := b.Write(produceFrame(64<<10, 2)[:1000]); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	// (Larger than what the pool has left next to a's frame.)
	if _, err := c.Write(frame(metadataRequest(9, strings.Repeat("x", 1000)), 3, "c")); err != nil {
		t.Fatal(err)
	}
	waitStats(t, s, "two connections waiting", func(st Stats) bool { return st.RequestWaiters == 2 })
	b.Close()
	c.Close()
	waitStats(t, s, "dropping the connection whose frame will never complete", func(st Stats) bool {
		return st.Conns == 2 && st.RequestWaiters == 1
	})
	close(release)
	select {
	case id := <-handled:
		if id != 3 {
			t.Fatalf("handled %d, want the whole frame of the closed connection (3)", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the whole frame of a closed connection was dropped")
	}
	waitStats(t, s, "returning all request memory", func(st Stats) bool { return st.RequestBytes == 0 && st.RequestWaiters == 0 })
}

// A frame whose body stops arriving keeps its memory while nobody else
// needs it; once another connection waits for request memory and the
// frame is past StalledFrameTimeout, its connection is closed (log line)
// and the waiting frame is served.
func TestStalledFrameClosedUnderContention(t *testing.T) {
	for _, idle := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) { testStalledFrame(t, idle) })
	}
}

func testStalledFrame(t *testing.T, idle time.Duration) {
	const mib = 1 << 20
	handled := make(chan int32, 4)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		handled <- req.CorrelationID
		return nil, nil
	})
	s, addr, logs := startServer(t, Config{
		MaxRequestBytes: 2 * mib, QueuedMaxRequestBytes: 3 * mib,
		StalledFrameTimeout: 300 * time.Millisecond, IdleTimeout: idle,
	}, h)
	a := dial(t, addr)
	if _, err := a.Write(produceFrame(2*mib, 1)[:100<<10]); err != nil { // then stalls
		t.Fatal(err)
	}
	waitStats(t, s, "reserving the stalled frame", func(st Stats) bool { return st.RequestBytes == 2*mib })
	time.Sleep(time.Second) // past the timeout, but nobody waits: a stays
	if st := s.Stats(); st.Conns != 1 || st.RequestBytes != 2*mib {
		t.Fatalf("stats %+v: a stalled frame was dropped without contention", st)
	}
	b := dial(t, addr)
	go b.Write(produceFrame(2*mib, 2))
	expectClosed(t, a)
	logs.waitFor(t, "request frame stalled: not complete")
	select {
	case id := <-handled:
		if id != 2 {
			t.Fatalf("handled request %d, want 2", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting frame was not served after the stalled one was closed")
	}
}

// metadataFrame is a metadata request frame of about size bytes: topics
// with 30,000-byte names.
func metadataFrame(size int, corr int32) []byte {
	var names []string
	for n := 0; n < size; n += 30_002 {
		names = append(names, strings.Repeat(string(rune('a'+len(names)%26)), 30_000))
	}
	return frame(metadataRequest(1, names...), corr, "m")
}
