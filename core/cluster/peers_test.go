package cluster

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// listeners binds one loopback listener per node ID, closed at cleanup.
func listeners(t *testing.T, n int) map[int32]net.Listener {
	lns := map[int32]net.Listener{}
	for id := int32(1); id <= int32(n); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[id] = ln
	}
	return lns
}

// acceptAndClose accepts connections on ln and closes each at once, until
// ln closes: a live broker's listener that a watcher can never hold on to.
func acceptAndClose(t *testing.T, ln net.Listener) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
}

// probedCluster starts n Nodes over one local store, each registered
// with the address of a real listener (lns) and the dead-broker probe on.
func probedCluster(t *testing.T, n int, ttl time.Duration, lns map[int32]net.Listener, stores map[int32]sdk.MetadataStore, logs *syncBuffer) *testCluster {
	c := newTestCluster(t, stores)
	c.tune = func(cfg *Config) {
		cfg.SessionTTL = ttl
		cfg.NoDeadBrokerProbe = false
		cfg.Port = int32(lns[cfg.NodeID].Addr().(*net.TCPAddr).Port)
		if logs != nil {
			cfg.Logger = slogTo(logs)
		}
	}
	for id := int32(1); id <= int32(n); id++ {
		c.start(id)
	}
	c.waitController()
	eventually(t, "every node sees every broker", func() bool {
		for _, node := range c.running() {
			if len(node.Brokers()) != n {
				return false
			}
		}
		return true
	})
	return c
}

// crash stops Node id the way a killed process stops: its goroutines end,
// its session is NOT revoked (the store would expire it after the TTL).
func (c *testCluster) crash(id int32) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	n.mu.Lock()
	n.shutdown = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

// A broker whose process is gone (its listener refuses connections) loses
// its session at once, long before the session timeout, and its
// leadership moves straight to another ISR member: no node ever sees the
// partition without a leader. Both for a broker that is not the
// controller (the controller watches it) and for the controller (the
// others watch it).
func TestDeadBrokerSessionEndsEarly(t *testing.T) {
	const ttl = time.Minute // only the probe can end a session within the test
	for _, victimIsController := range []bool{false, true} {
		name := "broker"
		if victimIsController {
			name = "controller"
		}
		t.Run(name, func(t *testing.T) {
			s := openLocal(t)
			stores := map[int32]sdk.MetadataStore{1: s, 2: s, 3: s}
			lns := listeners(t, 3)
			for _, ln := range lns {
				acceptAndHold(t, ln)
			}
			var logs syncBuffer
			c := probedCluster(t, 3, ttl, lns, stores, &logs)
			ctl := c.waitController()
			if _, err := c.node(ctl).CreateTopic(ctxT(t), "t", 3, 3, nil, nil); err != nil {
				t.Fatal(err)
			}
			leaders := map[int32]TopicPartition{}
			for p := int32(0); p < 3; p++ {
				tp := TopicPartition{"t", p}
				st := c.partition(tp, "has a full ISR", func(st PartitionState, _ []int32) bool {
					return st.Leader != NoLeader && len(st.ISR) == 3
				})
				leaders[st.Leader] = tp
			}
			victim := int32(0)
			for id := int32(1); id <= 3; id++ {
				if _, leads := leaders[id]; leads && (id == ctl) == victimIsController {
					victim = id
					break
				}
			}
			if victim == 0 {
				t.Fatalf("no broker to kill: leaders %v, controller %d", leaders, ctl)
			}
			tp := leaders[victim]
			start := time.Now()
			c.crash(victim)
			lns[victim].Close()
			eventually(t, "the dead broker's registration is gone", func() bool {
				for _, n := range c.running() {
					if slices.ContainsFunc(n.Brokers(), func(b BrokerInfo) bool { return b.ID == victim }) {
						return false
					}
				}
				return true
			})
			st := c.partition(tp, "has a new leader", func(st PartitionState, _ []int32) bool {
				return st.Leader != NoLeader && st.Leader != victim
			})
			t.Logf("broker %d (controller: %v) gone after %v; %s led by %d, ISR %v", victim, victimIsController, time.Since(start), tp, st.Leader, st.ISR)
			if slices.Contains(st.ISR, victim) {
				t.Errorf("%s ISR %v still holds dead broker %d", tp, st.ISR, victim)
			}
			for _, n := range c.running() {
				for _, role := range c.rec(n.cfg.NodeID).roles(tp) {
					if strings.Contains(role, "of -1") {
						t.Errorf("broker %d saw %s without a leader: %v", n.cfg.NodeID, tp, c.rec(n.cfg.NodeID).roles(tp))
						break
					}
				}
			}
			if !strings.Contains(logs.String(), "its process is gone") {
				t.Errorf("no node logged why it ended broker %d's session; logs:\n%s", victim, logs.String())
			}
		})
	}
}

// acceptAndHold accepts connections on ln and keeps them open, as a
// broker's listener does, until ln closes; then it closes them all.
func acceptAndHold(t *testing.T, ln net.Listener) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				mu.Lock()
				for _, c := range conns {
					c.Close()
				}
				conns = nil
				mu.Unlock()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
}

// A broker that is alive keeps its session, however its listener
// behaves: broker 2's listener is closed (it refuses connections: the
// controller suspects it, and it answers through the quorum), broker 3's
// accepts connections but closes each at once and its keep-alives stall
// for a while, broker 4's accepts into the backlog but never answers (a
// hung process). Nobody ends a session, nobody is fenced.
func TestSlowLiveBrokerKeepsSession(t *testing.T) {
	const ttl = 2 * time.Second
	s := openLocal(t)
	flaky := &flakyStore{MetadataStore: s}
	stores := map[int32]sdk.MetadataStore{1: s, 2: s, 3: flaky, 4: s}
	lns := listeners(t, 4)
	acceptAndHold(t, lns[1])
	acceptAndClose(t, lns[3])
	// lns[4] is never accepted from: the kernel still completes handshakes.
	var logs syncBuffer
	c := probedCluster(t, 4, ttl, lns, stores, &logs)
	ctl := c.waitController()
	sessions := map[int32]sdk.SessionID{}
	for id, b := range c.node(ctl).snapshot().brokers {
		sessions[id] = b.session
	}
	lns[2].Close() // refuses from now on
	// Keep-alives of broker 3 stall for well under the session timeout.
	flaky.noKeepAlive.Store(true)
	time.Sleep(ttl / 4)
	flaky.noKeepAlive.Store(false)
	time.Sleep(2 * ttl)
	for id := int32(1); id <= 4; id++ {
		b, ok := c.node(ctl).snapshot().brokers[id]
		if !ok || b.session != sessions[id] {
			t.Errorf("broker %d: registration %+v, want the first one (session %d)", id, b, sessions[id])
		}
		if f := c.rec(id).lines("fenced"); len(f) > 0 {
			t.Errorf("broker %d was fenced: %v", id, f)
		}
	}
	if strings.Contains(logs.String(), "its process is gone") {
		t.Errorf("a live broker's session was ended; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "answers through the metadata quorum") {
		t.Errorf("broker 2's listener refused connections, yet nobody asked it whether it lives; logs:\n%s", logs.String())
	}
}
