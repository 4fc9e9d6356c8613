package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// peerConfirmWindow is how long a suspected broker has to answer
	// through the quorum (delete its /suspects key) before a second
	// refused connection ends its session.
	peerConfirmWindow = 500 * time.Millisecond
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
	version int64 // of /brokers/<id>
}

// suspicion is the value of /suspects/<id>.
type suspicion struct {
	By      int32         `json:"by"`
	Session sdk.SessionID `json:"session"` // the suspected registration's
}

// watchPeers is owned by the Node (n.wg; it ends when ctx does, after
// waiting for its per-peer goroutines). It keeps one idle TCP connection
// open to the Kafka listener of each broker whose death this Node acts
// on: every other registered broker while this Node is the controller,
// else the controller's broker. A connection that ends, or can not be
// opened, makes the watcher probe the listener (watchPeer); a listener
// that refuses connections, twice, with the broker not answering through
// the quorum in between, belongs to a process that is gone, so the Node
// ends that registration and its session at once instead of waiting for
// the session timeout.
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
		want[peer{id: id, addr: net.JoinHostPort(b.info.Host, strconv.Itoa(int(b.info.Port))), session: b.session, version: b.version}] = true
	}
	return want
}

// watchPeer holds a connection to p's listener and probes it when the
// connection ends, until ctx ends or p's death is confirmed and its
// session ended. A refused connection makes it ask p, through the
// quorum, to prove it is alive; a second refusal after
// peerConfirmWindow, with no answer, confirms the death.
func (n *Node) watchPeer(ctx context.Context, p peer) {
	d := net.Dialer{Timeout: peerDialTimeout}
	dial := func() (net.Conn, bool) {
		conn, err := d.DialContext(ctx, "tcp", p.addr)
		return conn, err != nil && errors.Is(err, syscall.ECONNREFUSED)
	}
	for ctx.Err() == nil {
		conn, refused := dial()
		switch {
		case conn != nil:
			holdConn(ctx, conn)
			continue // probe at once
		case !refused:
			sleepCtx(ctx, peerRetry)
			continue
		}
		ver, err := n.suspect(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Debug("cluster: could not ask a broker whose listener refuses connections whether it lives", "broker", p.id, "err", err)
			}
			sleepCtx(ctx, peerRetry)
			continue
		}
		sleepCtx(ctx, peerConfirmWindow)
		if conn, refused = dial(); conn != nil || !refused {
			n.withdraw(p, ver)
			if conn != nil {
				holdConn(ctx, conn)
			}
			continue
		}
		switch n.endDeadSession(ctx, p, ver) {
		case verdictDead:
			return
		case verdictAlive:
			n.log.Warn("cluster: a broker whose listener refuses connections answers through the metadata quorum; leaving it to its session timeout",
				"broker", p.id, "address", p.addr)
			sleepCtx(ctx, n.cfg.SessionTTL)
		default:
			sleepCtx(ctx, peerRetry)
		}
	}
}

// suspect writes /suspects/<id> (ephemeral, with this Node's session):
// the suspected broker deletes it if it lives. It returns the key's
// version.
func (n *Node) suspect(ctx context.Context, p peer) (int64, error) {
	sess := n.currentSession()
	if sess == 0 {
		return 0, fmt.Errorf("cluster: not registered")
	}
	raw, _ := json.Marshal(suspicion{By: n.cfg.NodeID, Session: p.session})
	ctx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL/3)
	defer cancel()
	resp, err := n.store.Put(ctx, &sdk.PutRequest{Key: suspectKey(p.id), Value: raw, ExpectVersion: sdk.AnyVersion, Session: sess})
	if err != nil {
		return 0, err
	}
	return resp.Version, nil
}

// withdraw deletes this Node's suspicion of p (best effort: it is
// ephemeral, and the next suspicion overwrites it).
func (n *Node) withdraw(p peer, ver int64) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.SessionTTL/3)
	defer cancel()
	n.store.Delete(ctx, &sdk.DeleteRequest{Key: suspectKey(p.id), ExpectVersion: ver})
}

// verdict is endDeadSession's outcome.
type verdict uint8

const (
	verdictUnknown verdict = iota // the store could not be asked, or another Node decides
	verdictDead                   // the registration is gone, the session ended
	verdictAlive                  // the broker answered the suspicion
)

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

// endDeadSession ends p's registration if its suspicion ver is still
// unanswered and the registration unchanged, in one Txn (deleting
// /brokers/<id> and the suspicion), then revokes its session so the rest
// of its keys (/controller, if it was the controller's) go too.
func (n *Node) endDeadSession(ctx context.Context, p peer, ver int64) verdict {
	if b, ok := n.snapshot().brokers[p.id]; !ok || b.session != p.session {
		return verdictDead
	}
	tctx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL/3)
	_, err := n.store.Txn(tctx, &sdk.TxnRequest{
		Conditions: []sdk.Condition{{Key: suspectKey(p.id), Version: ver}, {Key: brokerKey(p.id), Version: p.version}},
		Ops:        []sdk.Op{{Type: sdk.OpDelete, Key: brokerKey(p.id)}, {Type: sdk.OpDelete, Key: suspectKey(p.id)}},
	})
	cancel()
	switch {
	case errors.Is(err, sdk.ErrVersionMismatch):
		gctx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL/3)
		defer cancel()
		_, gerr := n.store.Get(gctx, &sdk.GetRequest{Key: suspectKey(p.id)})
		if errors.Is(gerr, sdk.ErrNotFound) {
			if b, ok := n.snapshot().brokers[p.id]; ok && b.session == p.session {
				return verdictAlive
			}
			return verdictDead
		}
		return verdictUnknown // another Node's suspicion replaced ours: it decides
	case err != nil:
		return verdictUnknown
	}
	n.log.Info("cluster: broker's listener refuses connections and it did not answer through the quorum: its process is gone; ended its registration and session",
		"broker", p.id, "address", p.addr, "session", p.session)
	// The registration is gone, so watchPeers is about to cancel ctx:
	// the revocation runs on the Node's context, or a dead controller's
	// /controller would outlive it until its session timeout.
	err = n.retry(n.ctx, "end a dead broker's session", func() error {
		rctx, cancel := context.WithTimeout(n.ctx, n.cfg.SessionTTL/3)
		defer cancel()
		_, err := n.store.RevokeSession(rctx, &sdk.RevokeSessionRequest{ID: p.session})
		return err
	})
	if err != nil && !errors.Is(err, sdk.ErrSessionExpired) && n.ctx.Err() == nil {
		n.log.Warn("cluster: ending a dead broker's session failed; its session timeout will", "broker", p.id, "err", err)
	}
	return verdictDead
}

// noteSuspicion is called by the watcher for every write of this
// broker's /suspects key: if it names the current session, the
// suspicion goroutine answers it.
func (n *Node) noteSuspicion(ev *sdk.WatchEvent) {
	if ev.Type != sdk.EventPut {
		return
	}
	var s suspicion
	if json.Unmarshal(ev.Value, &s) != nil {
		return
	}
	n.mu.Lock()
	if s.Session != n.session || n.session == 0 {
		n.mu.Unlock()
		return
	}
	n.suspicion = max(n.suspicion, ev.Version)
	n.mu.Unlock()
	select {
	case n.suspected <- struct{}{}:
	default:
	}
}

// answerSuspicions is owned by the Node (n.wg): it deletes every
// suspicion of this broker, proving through the quorum that it lives.
func (n *Node) answerSuspicions(ctx context.Context) {
	defer n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.suspected:
		}
		n.mu.Lock()
		ver := n.suspicion
		n.suspicion = 0
		n.mu.Unlock()
		if ver == 0 {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL/3)
		_, err := n.store.Delete(actx, &sdk.DeleteRequest{Key: suspectKey(n.cfg.NodeID), ExpectVersion: ver})
		cancel()
		n.log.Warn("cluster: another broker found this broker's listener refusing connections and asked whether it lives; answered",
			"err", err)
	}
}
