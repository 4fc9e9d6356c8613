package wire

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vltava/vltava/core/invariant"
)

// smallFrameBytes is the largest frame that may use the pool's reserve:
// metadata, heartbeats, offset commits, fetch requests and produce
// requests of ordinary batches (Kafka's default message.max.bytes is just
// under 1 MiB).
const smallFrameBytes = 1 << 20

// DefaultQueuedMaxRequestBytes is Vltava's default queued.max.request.bytes
// (Kafka's is -1, unlimited): large enough for two frames of the default
// socket.request.max.bytes (100 MiB) and hundreds of ordinary produce
// requests at once, small next to the memory of any machine that runs a
// broker.
const DefaultQueuedMaxRequestBytes = 256 << 20

// requestPool is the broker-wide budget for request frames
// (queued.max.request.bytes). A reader reserves a frame's announced size
// after reading its 4-byte size and before reading its body; the
// reservation is returned when the request has been handled and its
// response written (or it was dropped). While a frame does not fit, its
// reader waits: the connection is not read (TCP backpressure), nothing is
// refused.
//
// A frame reserves its whole size at once, as Kafka's memory pool does,
// rather than growing its reservation as bytes arrive: a reader that held
// part of a frame while waiting for the rest could deadlock with the other
// readers doing the same (four 100 MiB frames arriving at once into a
// 256 MiB pool would each hold 64 MiB and wait forever). The memory
// actually used follows the bytes received: read buffers grow as the body
// arrives (readPayload), so a reservation is an upper bound, never an
// allocation.
//
// The last reserve bytes of the pool are kept for small frames
// (smallFrameBytes): peers that announce large frames and stall cannot
// starve ordinary requests of other clients. A small frame is admitted
// whenever it fits, even ahead of waiting large frames; large frames are
// admitted in arrival order.
//
// A nil *requestPool is unlimited: every method is a no-op.
type requestPool struct {
	capacity int64
	reserve  int64

	mu   sync.Mutex
	used int64 // bytes reserved now
	// waiters are readers waiting for room, in arrival order.
	// INVARIANT: outside mu, every waiter either does not fit or is a
	// large frame queued behind a large frame that does not fit.
	waiters []*poolWaiter
}

// poolWaiter is one reader waiting for n bytes. ready is closed, with
// granted set under the pool's mu, when the bytes are reserved for it.
type poolWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

// newRequestPool returns a pool of capacity bytes, or nil (unlimited) if
// capacity <= 0. maxFrame is the largest frame the server accepts at
// all; the reserve for small frames is a quarter of the pool, less if that
// would keep a frame of maxFrame bytes from ever fitting.
func newRequestPool(capacity, maxFrame int64) *requestPool {
	if capacity <= 0 {
		return nil
	}
	reserve := max(0, min(capacity/4, capacity-maxFrame))
	return &requestPool{capacity: capacity, reserve: reserve}
}

// check reports an error wrapping errFrameSize if a frame of n bytes could
// never be admitted.
func (p *requestPool) check(n int64) error {
	if p == nil {
		return nil
	}
	if limit := p.limit(n); n > limit {
		return fmt.Errorf("%w: %d bytes is more than the request memory pool admits for one frame (%d; queued.max.request.bytes %d)",
			errFrameSize, n, limit, p.capacity)
	}
	return nil
}

// limit is the most bytes frames of n's class may hold together.
func (p *requestPool) limit(n int64) int64 {
	if n <= smallFrameBytes {
		return p.capacity
	}
	return p.capacity - p.reserve
}

// fitsLocked reports whether n bytes can be reserved now.
func (p *requestPool) fitsLocked(n int64) bool {
	return p.used+n <= p.limit(n)
}

// errPeerGone reports that a connection's peer went away while its reader
// waited for request memory.
var errPeerGone = errors.New("wire: peer closed the connection while it waited for request memory")

// peerCheckInterval is how often a waiting reader checks that its peer is
// still there.
const peerCheckInterval = time.Second

// acquire reserves n bytes, waiting while they do not fit. It fails only
// when ctx ends first, or, if gone is not nil, when gone reports true in
// one of its checks every peerCheckInterval (errPeerGone); nothing is then
// reserved. The caller has checked n with check.
func (p *requestPool) acquire(ctx context.Context, n int64, gone func() bool) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	// A large frame queues behind large frames already waiting, so a
	// stream of them cannot starve the first; a small one only needs room.
	if p.fitsLocked(n) && (n <= smallFrameBytes || !p.largeWaitingLocked()) {
		p.used += n
		p.mu.Unlock()
		return nil
	}
	w := &poolWaiter{n: n, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()

	var tick <-chan time.Time
	if gone != nil {
		t := time.NewTicker(peerCheckInterval)
		defer t.Stop()
		tick = t.C
	}
	var err error
	for err == nil {
		select {
		case <-w.ready:
			return nil
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick:
			if gone() {
				err = errPeerGone
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		// Granted as the wait ended: give the bytes back.
		p.releaseLocked(n)
		return err
	}
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			break
		}
	}
	// Leaving may unblock large waiters that were queued behind w.
	p.grantLocked()
	return err
}

// largeWaitingLocked reports whether a large frame is waiting.
func (p *requestPool) largeWaitingLocked() bool {
	for _, w := range p.waiters {
		if w.n > smallFrameBytes {
			return true
		}
	}
	return false
}

// release returns n bytes reserved by acquire.
func (p *requestPool) release(n int64) {
	if p == nil || n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(n)
}

func (p *requestPool) releaseLocked(n int64) {
	p.used -= n
	// INVARIANT: the pool never gives back more than it reserved.
	if invariant.Enabled {
		invariant.Check(p.used >= 0, "wire: request pool: %d bytes reserved after releasing %d", p.used, n)
	}
	p.grantLocked()
}

// grantLocked admits waiters that fit, in order; once a large waiter does
// not fit, later large waiters wait behind it (small ones still go).
func (p *requestPool) grantLocked() {
	kept := p.waiters[:0]
	largeBlocked := false
	for _, w := range p.waiters {
		large := w.n > smallFrameBytes
		if (!large || !largeBlocked) && p.fitsLocked(w.n) {
			p.used += w.n
			w.granted = true
			close(w.ready)
			continue
		}
		if large {
			largeBlocked = true
		}
		kept = append(kept, w)
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
}

// poolStats is a snapshot of the pool.
type poolStats struct {
	used    int64
	waiting int
}

func (p *requestPool) stats() poolStats {
	if p == nil {
		return poolStats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return poolStats{used: p.used, waiting: len(p.waiters)}
}
