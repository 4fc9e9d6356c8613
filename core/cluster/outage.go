package cluster

import (
	"context"
	"time"
)

// A whole-store outage (see doc.go, "When the whole store is down"): a
// broker whose keep-alives fail asks its peers, before its lease lapses,
// whether they reach the store. If every other registered broker answers
// and none does, nobody can elect a leader (the controller acts through
// the store), so the broker keeps leading instead of fencing itself, and
// refuses metadata changes until the store answers again.

// PeerAnswer is one peer's answer to "do you reach the metadata store?".
type PeerAnswer struct {
	Answered bool // the peer answered (else it could not be reached)
	Reaches  bool // it read the store's current revision just now
}

// askBudget bounds one round of asking the peers (a broker asks about
// one budget before its lease lapses), outageRecheck spaces the rounds
// while the outage lasts, and recentKeepAlive is how recent a peer's last
// successful keep-alive must be to count as reaching the store without a
// read (keep-alives succeed every TTL/3; in a whole-store outage a peer's
// last one is about TTL/2 old or more when the asker asks, whatever the
// phases of their keep-alives).
func askBudget(ttl time.Duration) time.Duration       { return max(ttl/8, 100*time.Millisecond) }
func outageRecheck(ttl time.Duration) time.Duration   { return max(ttl/10, 100*time.Millisecond) }
func recentKeepAlive(ttl time.Duration) time.Duration { return ttl * 42 / 100 }

// ReachesStore is the answer a broker gives a peer that asks whether it
// reaches the store, without delay when it can: yes if its last
// keep-alive succeeded within recentKeepAlive (a slow store read on a
// loaded machine must not make a live store look down), no if since then
// its keep-alives fail and the latest failed within recentFailure (its
// keeper tries every retryAfterFailure, each attempt bounded by
// askBudget while it leads through an outage), else whether it reads the
// store's current revision within ctx.
func (n *Node) ReachesStore(ctx context.Context) bool {
	ttl := n.cfg.SessionTTL
	n.mu.Lock()
	ok := n.session != 0 && time.Since(n.lastKeepAlive) < recentKeepAlive(ttl)
	failing := n.lastFailure.After(n.lastKeepAlive) && time.Since(n.lastFailure) < recentFailure(ttl)
	n.mu.Unlock()
	switch {
	case ok:
		return true
	case failing:
		return false
	}
	_, err := n.storeRevision(ctx)
	return err == nil
}

// recentFailure: see ReachesStore.
func recentFailure(ttl time.Duration) time.Duration {
	return 2*askBudget(ttl) + retryAfterFailure
}

// StoreUnreachable reports whether this broker's lease lapsed: it keeps
// leading through a whole-store outage or is fenced. Metadata changes are
// refused meanwhile (they need the store).
func (n *Node) StoreUnreachable() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.outage || n.withhold
}

// StoreOutage reports whether the broker keeps leading through a
// whole-store outage (its lease lapsed, and no peer reaches the store).
func (n *Node) StoreOutage() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.outage
}

// peerVerdict is the outcome of one round of asking the peers.
type peerVerdict uint8

const (
	storeDown  peerVerdict = iota // every peer answered; none reaches the store
	peerCanAsk                    // some peer reaches the store, or there is no peer to ask
	unanswered                    // no peer reaches the store, but some did not answer
)

// wholeStoreDown asks every other registered broker of the view whether
// it reaches the store, within askBudget. It is true only if there is at
// least one peer, every peer answered, and none reaches the store: a peer
// that can not be reached may be the one that does, and a broker alone
// can not tell an outage from being cut off.
func (n *Node) wholeStoreDown(ctx context.Context) bool { return n.askPeers(ctx) == storeDown }

// askPeers runs one round of asking (see wholeStoreDown).
func (n *Node) askPeers(ctx context.Context) peerVerdict {
	if n.cfg.AskPeers == nil {
		return peerCanAsk
	}
	var peers []BrokerInfo
	for _, b := range n.snapshot().liveBrokers() {
		if b.ID != n.cfg.NodeID {
			peers = append(peers, b)
		}
	}
	if len(peers) == 0 {
		return peerCanAsk
	}
	actx, cancel := context.WithTimeout(ctx, askBudget(n.cfg.SessionTTL))
	defer cancel()
	answers := n.cfg.AskPeers(actx, peers)
	v := storeDown
	for _, p := range peers {
		a := answers[p.ID]
		switch {
		case a.Reaches:
			n.log.Info("cluster: a peer reaches the metadata store", "peer", p.ID)
			return peerCanAsk
		case !a.Answered:
			n.log.Info("cluster: a peer could not be asked whether it reaches the metadata store", "peer", p.ID)
			v = unanswered
		}
	}
	return v
}

// setOutage enters or leaves outage mode.
func (n *Node) setOutage(o bool) {
	n.mu.Lock()
	n.outage = o
	n.mu.Unlock()
}
