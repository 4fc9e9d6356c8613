// Package clustertest cuts brokers off from the raft metadata quorum in
// tests: Blackhole is a loopback TCP proxy that starts swallowing bytes on
// demand, and IsolatedRaft opens an in-process three-voter raft store
// whose chosen node reaches (and is reached by) the others only through
// blackholes.
package clustertest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Blackhole is a TCP proxy on loopback in front of target. Until cut it
// forwards both ways; once cut it still accepts connections and reads
// everything sent on them, but forwards and answers nothing, as a network
// that silently drops packets does (no reset, no FIN). heal closes the
// connections cut had frozen and forwards again.
type Blackhole struct {
	ln     net.Listener
	target string
	cut    atomic.Bool // see Cut

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // accept loop and pumps
}

func NewBlackhole(t testing.TB, target string) *Blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Blackhole{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's listening address.
func (p *Blackhole) Addr() string { return p.ln.Addr().String() }

func (p *Blackhole) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Blackhole) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			if p.track(c) {
				p.wg.Add(1)
				go p.pump(c, nil)
			}
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if p.track(c, up) {
			p.wg.Add(2)
			go p.pump(c, up)
			go p.pump(up, c)
		}
	}
}

// pump copies from src to dst while the proxy is not cut, and reads and
// discards once it is (dst nil: discard from the start).
func (p *Blackhole) pump(src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if err != io.EOF || dst == nil || p.cut.Load() {
				return
			}
			// Half-close is not needed by the protocols here: end both.
			src.Close()
			dst.Close()
			return
		}
	}
}

// Heal drops every connection (those frozen by cut among them) and
// forwards new ones again.
func (p *Blackhole) Heal() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.cut.Store(false)
	for c := range conns {
		c.Close()
	}
}

func (p *Blackhole) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// Cut starts swallowing: from now on nothing is forwarded or answered on
// any connection, old or new.
func (p *Blackhole) Cut() { p.cut.Store(true) }
