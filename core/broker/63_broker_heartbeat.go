package broker

// BrokerHeartbeat v0-v2 (KIP-631), between Vltava brokers. In KRaft a
// broker heartbeats to the controller, which answers whether it is
// fenced; Vltava has no controller listener, and uses the API for the
// question a broker whose metadata-store keep-alives fail asks its peers
// before its lease lapses (core/cluster, "When the whole store is down"):
// "do you reach the metadata store?". The peer answers from its own
// keep-alives when they tell, else reads the store's current revision
// (bounded by a sixteenth of its session timeout), and answers IsFenced
// false if it reaches the store, true if not;
// IsCaughtUp says its own lease is current. The request's fields are
// ignored but BrokerID, which names the asker in the log. It needs
// CLUSTER_ACTION on the cluster, like every broker-to-broker API.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/wire"
)

func handleBrokerHeartbeat(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.BrokerHeartbeatRequest)
	resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.IsFenced = true
	var n *cluster.Node
	if b.cl != nil {
		n = b.cl.node
	}
	if n == nil {
		return reply(resp)
	}
	pctx, cancel := context.WithTimeout(ctx, b.storeProbeTimeout())
	reaches := n.ReachesStore(pctx)
	cancel()
	resp.IsFenced = !reaches
	resp.IsCaughtUp = reaches && !n.StoreUnreachable()
	b.logger.Debug("broker: a peer asked whether this broker reaches the metadata store", "peer", r.BrokerID, "reaches", reaches)
	return reply(resp)
}

// storeProbeTimeout bounds the store read that answers a peer when its
// own keep-alives do not tell (cluster.Node.ReachesStore): half of the
// asker's budget (session timeout/8).
func (b *Broker) storeProbeTimeout() time.Duration {
	return max(time.Duration(b.cfg.BrokerSessionTimeoutMs)*time.Millisecond/16, 50*time.Millisecond)
}

// peerAsker is cluster.Config.AskPeers: one inter-broker client per peer
// address, kept while the peer stays registered there.
type peerAsker struct {
	b       *Broker
	mu      sync.Mutex
	clients map[string]*kgo.Client // by host:port
}

func (a *peerAsker) ask(ctx context.Context, peers []cluster.BrokerInfo) map[int32]cluster.PeerAnswer {
	out := make(map[int32]cluster.PeerAnswer, len(peers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		cl, err := a.client(p)
		if err != nil {
			a.b.logger.Warn("broker: ask a peer about the metadata store", "peer", p.ID, "err", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrBrokerHeartbeatRequest()
			req.BrokerID, req.BrokerEpoch = a.b.cfg.NodeID, -1
			resp, err := req.RequestWith(ctx, cl.Broker(int(p.ID)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil || resp.ErrorCode != 0 {
				a.b.logger.Info("broker: a peer could not be asked about the metadata store", "peer", p.ID, "err", err)
				return
			}
			out[p.ID] = cluster.PeerAnswer{Answered: true, Reaches: !resp.IsFenced}
		}()
	}
	wg.Wait()
	return out
}

// client returns the kgo client seeded with p's registered address;
// requests go to p by ID.
func (a *peerAsker) client(p cluster.BrokerInfo) (*kgo.Client, error) {
	addr := net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port)))
	a.mu.Lock()
	defer a.mu.Unlock()
	if cl := a.clients[addr]; cl != nil {
		return cl, nil
	}
	opts, err := a.b.interBrokerOpts()
	if err != nil {
		return nil, err
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("vltava-peer-%d", a.b.cfg.NodeID)),
		kgo.RequestRetries(0)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	if a.clients == nil {
		a.clients = map[string]*kgo.Client{}
	}
	a.clients[addr] = cl
	return cl, nil
}

func (a *peerAsker) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for addr, cl := range a.clients {
		cl.Close()
		delete(a.clients, addr)
	}
}
