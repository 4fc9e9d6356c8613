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
	budget := askBudget(ttl)
	next := time.Now().Add(interval) // next keep-alive
	t := time.NewTimer(interval)
	defer t.Stop()
	var (
		failedFrom time.Time // a keep-alive failed since the lease started at failedFrom
		askedFrom  time.Time // peers were asked for the lease that started at askedFrom ...
		storeDown  bool      // ... and answered that none of them reaches the store
		recheck    time.Time // in outage mode: next round of asking
		silent     int       // in outage mode: rounds in a row in which a peer did not answer
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.kick: // CheckSession: renew now
			next = time.Now()
		}
		n.mu.Lock()
		sess, stop, from, fenced, outage := n.session, n.shutdown, n.leaseFrom, n.fenced, n.outage
		n.mu.Unlock()
		now := time.Now()
		// Before the lease lapses, a broker whose keep-alives fail asks
		// its peers whether they reach the store (outage.go), so that
		// the answer is at most one budget old when it lapses.
		askAt := from.Add(lease - budget - budget/4)
		if !stop && sess != 0 && !fenced && !outage && n.cfg.AskPeers != nil &&
			failedFrom.Equal(from) && !askedFrom.Equal(from) && !now.Before(askAt) {
			storeDown, askedFrom = n.wholeStoreDown(ctx), from
			now = time.Now()
		}
		if !stop && sess != 0 && !fenced && !outage && !now.Before(from.Add(lease)) {
			if askedFrom.Equal(from) && storeDown {
				n.log.Warn("cluster: no broker reaches the metadata store: leading on through the outage; metadata changes are refused until it answers",
					"session", sess, "since", now.Sub(from).Round(time.Millisecond), "session_timeout", ttl)
				n.setOutage(true)
				outage, recheck, silent = true, now.Add(outageRecheck(ttl)), 0
			} else {
				n.log.Warn("cluster: no successful keep-alive within the session timeout; the broker is fenced until one succeeds",
					"session", sess, "since", now.Sub(from).Round(time.Millisecond), "session_timeout", ttl)
				n.lapse()
				fenced = true
			}
		}
		if outage && !now.Before(recheck) {
			// A peer that does not answer once (a loaded machine) gets
			// a second round before it counts: it may be the one that
			// reaches the store, so never more than one.
			v := n.askPeers(ctx)
			if v == unanswered {
				silent++
			} else {
				silent = 0
			}
			if v == peerCanAsk || silent >= 2 {
				silent = 0
				// A peer reaches the store (or can not be asked): so may
				// this broker by now; if not, it is the one cut off.
				sent := time.Now()
				actx, cancel := context.WithTimeout(ctx, budget)
				_, err := n.store.KeepAlive(actx, &sdk.KeepAliveRequest{ID: sess})
				cancel()
				if err == nil {
					n.mu.Lock()
					if n.session == sess {
						n.leaseFrom, from = sent, sent
						n.lastKeepAlive = time.Now()
					}
					n.mu.Unlock()
					n.log.Info("cluster: the metadata store answers again; the outage is over", "session", sess)
				} else {
					n.noteFailure()
					n.log.Warn("cluster: a peer reaches the metadata store (or can not be asked) while this broker does not: the broker is fenced until a keep-alive succeeds",
						"session", sess, "since", time.Since(from).Round(time.Millisecond), "err", err)
					n.lapse()
					fenced = true
				}
				n.setOutage(false)
				outage = false
				next = time.Now() // a keep-alive now: renews, or finds the session gone
			}
			now = time.Now()
			recheck = now.Add(outageRecheck(ttl))
		}
		// wake is when the loop must run again at the latest: the ask,
		// the lapse, or the next round of asking.
		wake := func(at time.Time) time.Duration {
			switch {
			case outage:
				at = earliest(at, recheck)
			case !fenced:
				at = earliest(at, from.Add(lease))
				if n.cfg.AskPeers != nil && failedFrom.Equal(from) && !askedFrom.Equal(from) {
					at = earliest(at, askAt)
				}
			}
			return max(time.Until(at), time.Millisecond)
		}
		if now.Before(next) {
			t.Reset(wake(next))
			continue
		}
		if stop || sess == 0 {
			next = now.Add(interval)
			t.Reset(interval)
			continue
		}
		// The attempt ends by the next keep-alive's time, and never
		// after the lease does (or the moment to ask the peers), so the
		// checks above run on time.
		sent := time.Now()
		dl := sent.Add(interval)
		if outage {
			dl = sent.Add(budget) // so the rounds of asking run on time
		}
		if !fenced && !outage {
			dl = earliest(dl, from.Add(lease))
			if n.cfg.AskPeers != nil && !askedFrom.Equal(from) && askAt.After(sent) {
				dl = earliest(dl, askAt)
			}
		}
		actx, cancel := context.WithDeadline(ctx, dl)
		_, err := n.store.KeepAlive(actx, &sdk.KeepAliveRequest{ID: sess})
		cancel()
		switch {
		case err == nil:
			n.mu.Lock()
			if n.session == sess {
				n.leaseFrom, from = sent, sent
				n.lastKeepAlive = time.Now()
			}
			n.mu.Unlock()
			next = sent.Add(interval)
			if outage {
				n.log.Info("cluster: the metadata store answers again; the outage is over", "session", sess)
				n.setOutage(false)
				outage = false
			}
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
			n.setOutage(false)
			outage = false
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
			n.noteFailure()
			failedFrom = from
			next = time.Now().Add(retryAfterFailure)
		}
		t.Reset(wake(next))
	}
}

// noteFailure records a failed keep-alive (ReachesStore).
func (n *Node) noteFailure() {
	n.mu.Lock()
	n.lastFailure = time.Now()
	n.mu.Unlock()
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// lapse fences the broker because its lease lapsed: leaderships are
// withheld first, so none slips in after ApplyFenced(true).
func (n *Node) lapse() {
	n.setWithhold(true)
	n.setFenced(true)
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
