package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// outageCluster is three Nodes over one local store, each through a
// frozenStore, that ask each other in process (AskPeers) whether they
// reach the store; unreachable[id] makes node id unaskable.
type outageCluster struct {
	*testCluster
	store       sdk.MetadataStore
	frozen      map[int32]*frozenStore
	unreachable map[int32]*atomic.Bool
}

func newOutageCluster(t *testing.T) *outageCluster {
	s := openLocal(t)
	oc := &outageCluster{store: s, frozen: map[int32]*frozenStore{}, unreachable: map[int32]*atomic.Bool{}}
	stores := map[int32]sdk.MetadataStore{}
	for id := int32(1); id <= 3; id++ {
		oc.frozen[id] = &frozenStore{flakyStore: flakyStore{MetadataStore: s}}
		oc.unreachable[id] = &atomic.Bool{}
		stores[id] = oc.frozen[id]
	}
	oc.testCluster = newTestCluster(t, stores)
	oc.tune = func(cfg *Config) {
		cfg.SessionTTL = time.Second
		cfg.AskPeers = func(ctx context.Context, peers []BrokerInfo) map[int32]PeerAnswer {
			out := map[int32]PeerAnswer{}
			for _, p := range peers {
				n := oc.node(p.ID)
				if n == nil || oc.unreachable[p.ID].Load() {
					continue
				}
				out[p.ID] = PeerAnswer{Answered: true, Reaches: n.ReachesStore(ctx)}
			}
			return out
		}
	}
	for id := int32(1); id <= 3; id++ {
		oc.start(id)
	}
	oc.waitController()
	eventually(t, "every node sees every broker", func() bool {
		for _, n := range oc.running() {
			if len(n.Brokers()) != 3 {
				return false
			}
		}
		return true
	})
	return oc
}

// keepSessionsInStore renews every node's session directly in the store
// until stop closes, as a store that is down does not run its session
// clocks (etcd and ZooKeeper restore sessions with a full TTL when they
// come back): the frozen stores stand for an unreachable store, the
// local store behind them would otherwise expire the sessions.
func (oc *outageCluster) keepSessionsInStore(t *testing.T) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, n := range oc.running() {
				n.mu.Lock()
				sess := n.session
				n.mu.Unlock()
				if sess != 0 {
					oc.store.KeepAlive(context.Background(), &sdk.KeepAliveRequest{ID: sess})
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// A whole-store outage: no broker reaches the store, so none fences
// itself; the leader keeps leading (no fencing, no new leader), metadata
// changes are refused meanwhile, and when the store answers again every
// broker leaves outage mode with the same leader and epoch.
func TestWholeStoreOutageKeepsLeaders(t *testing.T) {
	oc := newOutageCluster(t)
	if _, err := oc.node(1).CreateTopic(ctxT(t), "o", 1, 3, [][]int32{{3, 1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"o", 0}
	before := oc.partition(tp, "led by broker 3", func(st PartitionState, _ []int32) bool { return st.Leader == 3 })

	stop := oc.keepSessionsInStore(t)
	for _, f := range oc.frozen {
		f.freeze()
	}
	eventually(t, "every broker in outage mode", func() bool {
		for _, n := range oc.running() {
			if !n.StoreOutage() {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // two session timeouts into the outage
	for id := int32(1); id <= 3; id++ {
		if oc.node(id).Fenced() || oc.rec(id).isFenced() {
			t.Errorf("broker %d fenced itself during a whole-store outage", id)
		}
		if !oc.node(id).StoreOutage() || !oc.node(id).StoreUnreachable() {
			t.Errorf("broker %d: outage %v, store unreachable %v; want both", id, oc.node(id).StoreOutage(), oc.node(id).StoreUnreachable())
		}
	}
	if st, ok := oc.rec(3).state(tp); !ok || st.Leader != 3 || st.LeaderEpoch != before.LeaderEpoch {
		t.Errorf("broker 3 was last given %+v during the outage, want leader 3 at epoch %d", st, before.LeaderEpoch)
	}
	for _, id := range []int32{3, 1, 2} { // the leader's first: a broker that finds a peer reaching the store first fences itself
		oc.frozen[id].thaw()
	}
	stop()
	eventually(t, "every broker out of outage mode", func() bool {
		for _, n := range oc.running() {
			if n.StoreOutage() || n.StoreUnreachable() || n.Fenced() {
				return false
			}
		}
		return true
	})
	after := oc.partition(tp, "still led by broker 3", func(st PartitionState, _ []int32) bool { return st.Leader == 3 })
	if after.LeaderEpoch != before.LeaderEpoch {
		t.Errorf("leader epoch %d after the outage, was %d: a leader was elected", after.LeaderEpoch, before.LeaderEpoch)
	}
	for _, l := range oc.rec(3).lines("fenced") {
		t.Errorf("broker 3: %s", l)
	}
}

// A broker cut off from a store its peers reach fences itself, as
// without the peer check; so does one whose peers cannot all be asked
// while none of those asked reaches the store.
func TestCutOffBrokerFencesDespitePeerCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		freeze []int32 // frozen stores
		unask  []int32 // brokers that cannot be asked
	}{
		{"peers reach the store", []int32{3}, nil},
		{"a peer cannot be asked", []int32{1, 2, 3}, []int32{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			oc := newOutageCluster(t)
			if _, err := oc.node(1).CreateTopic(ctxT(t), "c", 1, 3, [][]int32{{3, 1, 2}}, nil); err != nil {
				t.Fatal(err)
			}
			oc.partition(TopicPartition{"c", 0}, "led by broker 3", func(st PartitionState, _ []int32) bool { return st.Leader == 3 })
			stop := oc.keepSessionsInStore(t)
			defer stop()
			for _, id := range c.unask {
				oc.unreachable[id].Store(true)
			}
			for _, id := range c.freeze {
				oc.frozen[id].freeze()
			}
			eventually(t, "broker 3 fenced", func() bool { return oc.rec(3).isFenced() })
			if oc.node(3).StoreOutage() {
				t.Errorf("broker 3 in outage mode")
			}
			for _, id := range c.freeze {
				oc.frozen[id].thaw()
			}
		})
	}
}
