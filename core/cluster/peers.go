package cluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// Dead-broker detection (see doc.go, "Ending a dead broker's session").
const (
	// peerDialTimeout bounds one connection attempt to a peer's listener.
	peerDialTimeout = time.Second
	// peerRefusals is how many refused connections in a row, peerRecheck
	// apart, confirm that a peer's process is gone.
	peerRefusals = 2
	peerRecheck  = 100 * time.Millisecond
	// peerRetry spaces attempts after a connection attempt that neither
	// succeeded nor was refused (a timeout: a hung host or a partition,
	// which only the session timeout may judge).
	peerRetry = 500 * time.Millisecond
)

// peer is a registration being watched.
type peer struct {
	id      int32
	addr    string
	session sdk.SessionID
}

// watchPeers is owned by the Node (n.wg; it ends when ctx does, after
// waiting for its per-peer goroutines). It keeps one idle TCP connection
// open to the Kafka listener of each broker whose death this Node acts
// on: every other registered broker while this Node is the controller,
// else the controller's broker. A connection that ends, or can not be
// opened, makes the watcher probe the listener; a listener that refuses
// connections peerRefusals times in a row belongs to a process that is
// gone (a live broker binds its listener before it registers and keeps
// it until it has left), so the Node ends that registration's session
// at once instead of waiting for the session timeout.
func (n *Node) watchPeers(ctx context.Context) {
	defer n.wg.Done()
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	watching := map[peer]running{}
	defer func() {
		for p, r := range watching {
			r.cancel()
			<-r.done
			delete(watching, p)
		}
	}()
	for {
		n.mu.Lock()
		v, ch := n.view, n.changed
		n.mu.Unlock()
		want := n.peersToWatch(v)
		for p, r := range watching {
			if !want[p] {
				r.cancel()
				<-r.done
				delete(watching, p)
			}
		}
		for p := range want {
			if _, ok := watching[p]; ok {
				continue
			}
			pctx, cancel := context.WithCancel(ctx)
			r := running{cancel: cancel, done: make(chan struct{})}
			watching[p] = r
			go func() {
				defer close(r.done)
				n.watchPeer(pctx, p)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-time.After(time.Second): // controllership is not in the view alone
		}
	}
}

// peersToWatch lists the registrations this Node watches in view v.
func (n *Node) peersToWatch(v *view) map[peer]bool {
	n.mu.Lock()
	ctl := n.controllerVer != 0 && v.controller.version == n.controllerVer
	stop := n.shutdown || n.session == 0
	n.mu.Unlock()
	want := map[peer]bool{}
	if stop {
		return want
	}
	for id, b := range v.brokers {
		if id == n.cfg.NodeID || b.session == sdk.NoSession || b.info.Host == "" || b.info.Port <= 0 {
			continue
		}
		if !ctl && (v.controller.version == 0 || v.controller.id != id) {
			continue
		}
		want[peer{id: id, addr: net.JoinHostPort(b.info.Host, strconv.Itoa(int(b.info.Port))), session: b.session}] = true
	}
	return want
}

// watchPeer holds a connection to p's listener and probes it when the
// connection ends, until ctx ends or p's death is confirmed and its
// session ended.
func (n *Node) watchPeer(ctx context.Context, p peer) {
	d := net.Dialer{Timeout: peerDialTimeout}
	refused := 0
	for ctx.Err() == nil {
		conn, err := d.DialContext(ctx, "tcp", p.addr)
		switch {
		case err == nil:
			refused = 0
			holdConn(ctx, conn)
			continue // probe at once
		case errors.Is(err, syscall.ECONNREFUSED):
			refused++
			if refused >= peerRefusals {
				n.endDeadSession(ctx, p)
				return
			}
			sleepCtx(ctx, peerRecheck)
		default:
			refused = 0
			sleepCtx(ctx, peerRetry)
		}
	}
}

// holdConn blocks until conn ends (the peer closed it, its host reset
// it) or ctx ends. Nothing is ever sent; whatever arrives is discarded.
func holdConn(ctx context.Context, conn net.Conn) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// endDeadSession revokes the session of p's registration if the view
// still shows that registration, retrying while the store is
// unavailable (a quorum that lost its leader with the dead process).
func (n *Node) endDeadSession(ctx context.Context, p peer) {
	if b, ok := n.snapshot().brokers[p.id]; !ok || b.session != p.session {
		return
	}
	n.log.Info("cluster: broker's listener refuses connections: its process is gone; ending its session now",
		"broker", p.id, "address", p.addr, "session", p.session)
	err := n.retry(ctx, "end a dead broker's session", func() error {
		rctx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL/3)
		defer cancel()
		_, err := n.store.RevokeSession(rctx, &sdk.RevokeSessionRequest{ID: p.session})
		return err
	})
	if err != nil && !errors.Is(err, sdk.ErrSessionExpired) && ctx.Err() == nil {
		n.log.Warn("cluster: ending a dead broker's session failed; its session timeout will", "broker", p.id, "err", err)
	}
}
