package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// leaseMargin is how long before its session could expire in the store
// a broker that could not renew it fences itself. The store starts the
// session's deadline when a grant or keep-alive reaches it, which is
// after the broker sent it; the broker counts from the send, so even a
// zero margin fences first. The margin covers the time fencing itself
// takes and clock-rate differences between hosts.
func leaseMargin(ttl time.Duration) time.Duration {
	return max(ttl/20, 100*time.Millisecond)
}

// retryAfterFailure spaces keep-alives after a failed one.
const retryAfterFailure = 100 * time.Millisecond

// keepSession renews the session every TTL/3, each attempt bounded by a
// deadline, and fences the broker from its own clock (see doc.go,
// "Registration and fencing"):
//
//   - The lease runs from the moment the last successful grant or
//     keep-alive was sent. Once TTL minus leaseMargin has passed without
//     another success, the broker is fenced (FenceApplier), whatever the
//     network does: a keep-alive lost in a partition times out instead
//     of hanging. The store can not have expired the session yet, so the
//     controller can not have elected another leader yet.
//   - A later keep-alive that succeeds means the session lived on: the
//     broker waits until its view has caught up with the store (so it
//     acts on the controller's current decisions) and unfences.
//   - When the store says the session ended, the broker stays fenced,
//     registers with a new session, catches up, and unfences.
func (n *Node) keepSession(ctx context.Context) {
	defer n.wg.Done()
	ttl := n.cfg.SessionTTL
	interval := ttl / 3
	lease := ttl - leaseMargin(ttl)
	next := time.Now().Add(interval) // next keep-alive
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.kick: // CheckSession: renew now
			next = time.Now()
		}
		n.mu.Lock()
		sess, stop, from, fenced := n.session, n.shutdown, n.leaseFrom, n.fenced
		n.mu.Unlock()
		now := time.Now()
		if !stop && sess != 0 && !fenced && !now.Before(from.Add(lease)) {
			n.log.Warn("cluster: no successful keep-alive within the session timeout; the broker is fenced until one succeeds",
				"session", sess, "since", now.Sub(from).Round(time.Millisecond), "session_timeout", ttl)
			n.lapse()
			fenced = true
		}
		if now.Before(next) {
			t.Reset(n.nextWake(next, from.Add(lease), fenced))
			continue
		}
		if stop || sess == 0 {
			next = now.Add(interval)
			t.Reset(interval)
			continue
		}
		// The attempt ends by the next keep-alive's time, and never
		// after the lease does, so the check above runs on time.
		sent := time.Now()
		dl := sent.Add(interval)
		if end := from.Add(lease); !fenced && end.Before(dl) {
			dl = end
		}
		actx, cancel := context.WithDeadline(ctx, dl)
		_, err := n.store.KeepAlive(actx, &sdk.KeepAliveRequest{ID: sess})
		cancel()
		switch {
		case err == nil:
			n.mu.Lock()
			if n.session == sess {
				n.leaseFrom, from = sent, sent
			}
			n.mu.Unlock()
			next = sent.Add(interval)
			if fenced {
				if n.catchUp(ctx, interval) {
					n.log.Info("cluster: keep-alive succeeded again and the view is current; the broker is unfenced", "session", sess)
					n.setFenced(false)
					n.setWithhold(false)
					fenced = false
				} else {
					next = time.Now().Add(retryAfterFailure)
				}
			}
		case errors.Is(err, sdk.ErrSessionExpired):
			if !n.reRegister(ctx, sess) {
				return
			}
			n.mu.Lock()
			from = n.leaseFrom
			n.mu.Unlock()
			fenced = false
			next = time.Now().Add(interval)
		case ctx.Err() != nil:
			return
		default:
			n.log.Debug("cluster: keep-alive failed; retrying", "session", sess, "err", err)
			next = time.Now().Add(retryAfterFailure)
		}
		t.Reset(n.nextWake(next, from.Add(lease), fenced))
	}
}

// lapse fences the broker because its lease lapsed: leaderships are
// withheld first, so none slips in after ApplyFenced(true).
func (n *Node) lapse() {
	n.setWithhold(true)
	n.setFenced(true)
}

// nextWake is how long to sleep until the next keep-alive, or until the
// lease ends if that is sooner and the broker is not fenced yet.
func (n *Node) nextWake(next, leaseEnd time.Time, fenced bool) time.Duration {
	at := next
	if !fenced && leaseEnd.Before(at) {
		at = leaseEnd
	}
	return max(time.Until(at), time.Millisecond)
}

// reRegister handles a session the store ended: the broker is fenced,
// registers with a new session, waits until its view is current and
// unfences. false means ctx ended (or the Node shuts down).
func (n *Node) reRegister(ctx context.Context, sess sdk.SessionID) bool {
	n.mu.Lock()
	stop := n.shutdown
	n.session = 0
	n.signalLocked()
	n.mu.Unlock()
	if stop {
		return ctx.Err() == nil
	}
	n.log.Warn("cluster: session expired; the broker is fenced until it registers again", "session", sess)
	// The controller may have moved what this broker led, but its view
	// can still name it leader: the store may have answered the
	// keep-alive before the watch caught up (a store plugin resuming
	// after a pause). Leaderships stay withheld until the view has
	// caught up with the store after registering; states that name other
	// leaders still come, so the broker follows them meanwhile.
	n.lapse()
	for b := newBackoff(); ; {
		err := n.register(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		n.log.Error("cluster: register again", "err", err)
		b.wait(ctx)
	}
	for !n.catchUp(ctx, n.cfg.SessionTTL/3) {
		if ctx.Err() != nil {
			return false
		}
	}
	n.setFenced(false)
	n.setWithhold(false)
	return true
}

// catchUp waits, up to timeout, until the view has caught up with the
// store's current revision, so a broker that was fenced sees what
// happened meanwhile (leaderships moved by the controller) before it acts
// again.
func (n *Node) catchUp(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rev, err := n.storeRevision(ctx)
	if err != nil {
		return false
	}
	return n.waitView(ctx, func(v *view) bool { return v.rev >= rev })
}
