package kerberos

import (
	"crypto/sha256"
	"sync"
	"time"
)

// replays remembers the authenticators accepted within the clock-skew
// window, so a captured AP-REQ presented again is refused (RFC 4120
// 3.2.3). An authenticator is identified by a hash of its ciphertext, as
// MIT Kerberos (1.18+) does, rather than by (client, ctime, cusec) as
// gokrb5's own cache does: a replay repeats the ciphertext exactly,
// while two authenticators a client made in the same microsecond
// differ in their confounder and subkey. gokrb5's client does not keep
// its timestamps unique (RFC 4120's "SHOULD"), so keying on the time
// refused one of two concurrent logins of a Go client now and then.
//
// There is no goroutine: expired entries are dropped on insertion, from
// the front of the queue (entries are appended in time order).
type replays struct {
	mu    sync.Mutex
	seen  map[[sha256.Size]byte]struct{}
	queue []replayEntry // insertion order; expiry non-decreasing for one window
}

type replayEntry struct {
	sum    [sha256.Size]byte
	expiry time.Time
}

// first records cipher and reports whether it was not seen before within
// window. An authenticator's time is within the skew of now, so one seen
// more than twice the skew ago cannot pass the time check again:
// window = 2 × skew keeps every entry that could still be replayed.
func (r *replays) first(cipher []byte, now time.Time, window time.Duration) bool {
	sum := sha256.Sum256(cipher)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = make(map[[sha256.Size]byte]struct{})
	}
	for len(r.queue) > 0 && !now.Before(r.queue[0].expiry) {
		delete(r.seen, r.queue[0].sum)
		r.queue[0] = replayEntry{}
		r.queue = r.queue[1:]
	}
	if _, ok := r.seen[sum]; ok {
		return false
	}
	r.seen[sum] = struct{}{}
	r.queue = append(r.queue, replayEntry{sum: sum, expiry: now.Add(window)})
	return true
}
