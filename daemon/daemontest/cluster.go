package daemontest

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"syscall"
	"testing"
)

// Cluster is N vltavad brokers forming one cluster: node IDs 1..N, each
// with its own Kafka listener, quorum listener and data directory, all
// voters of the raft metadata quorum.
//
//	c := daemontest.StartCluster(t, bin, 3, "--log-level", "debug")
//	c.Broker(2).Kill9()
//	c.Broker(2).Restart(t)
type Cluster struct {
	procs  []*Proc
	voters string
}

// StartCluster starts n brokers at once (a quorum needs a majority, so
// none can be waited for alone) and returns when every one accepts
// connections. args are added to every broker's command line; it must not
// contain --listen, --node-id, --data-dir or the quorum flags. Every
// broker is killed when the test ends.
func StartCluster(t testing.TB, bin string, n int, args ...string) *Cluster {
	t.Helper()
	for _, f := range []string{"listen", "node-id", "data-dir", "quorum-listen", "quorum-voters"} {
		if flagValue(args, f) != "" {
			t.Fatalf("daemontest.StartCluster sets --%s itself; drop it from %q", f, args)
		}
	}
	c := &Cluster{}
	quorum := make([]string, n)
	var vs []string
	for i := range n {
		quorum[i] = FreePort(t)
		vs = append(vs, fmt.Sprintf("%d@%s", i+1, quorum[i]))
	}
	c.voters = strings.Join(vs, ",")
	for i := range n {
		p := &Proc{bin: bin, addr: FreePort(t), dataDir: t.TempDir()}
		p.logPath = filepath.Join(t.TempDir(), fmt.Sprintf("vltavad-%d.log", i+1))
		p.args = append([]string{
			"--listen", p.addr, "--node-id", strconv.Itoa(i + 1), "--data-dir", p.dataDir,
			"--quorum-listen", quorum[i], "--quorum-voters", c.voters,
		}, args...)
		p.nodeID = int32(i + 1)
		t.Cleanup(p.kill)
		c.procs = append(c.procs, p)
	}
	for _, p := range c.procs {
		p.launch(t)
	}
	c.WaitReady(t)
	return c
}

// WaitReady waits until every running broker accepts connections.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	for _, p := range c.procs {
		if p.Running() {
			p.WaitReady(t)
		}
	}
}

// Broker returns the broker with node ID id (1..N).
func (c *Cluster) Broker(id int32) *Proc { return c.procs[id-1] }

// Brokers returns every broker, in node ID order.
func (c *Cluster) Brokers() []*Proc { return append([]*Proc(nil), c.procs...) }

// Addrs lists the Kafka listeners of the running brokers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, p := range c.procs {
		if p.Running() {
			out = append(out, p.addr)
		}
	}
	return out
}

// AllAddrs lists every broker's Kafka listener, running or not.
func (c *Cluster) AllAddrs() []string {
	var out []string
	for _, p := range c.procs {
		out = append(out, p.addr)
	}
	return out
}

// Voters is the --quorum-voters value every broker runs with.
func (c *Cluster) Voters() string { return c.voters }

// NodeIDOf maps a Kafka listener address to its broker's node ID (0 if
// none).
func (c *Cluster) NodeIDOf(addr string) int32 {
	for _, p := range c.procs {
		if p.addr == addr {
			return p.nodeID
		}
	}
	return 0
}

// RestartAll starts every stopped broker at once and waits for all of
// them, for when no quorum is left to let one start alone.
func (c *Cluster) RestartAll(t testing.TB) {
	t.Helper()
	var stopped []*Proc
	for _, p := range c.procs {
		if !p.Running() {
			p.launch(t)
			stopped = append(stopped, p)
		}
	}
	for _, p := range stopped {
		p.WaitReady(t)
	}
}

// Launch starts a stopped broker again without waiting for it; pair it
// with WaitReady when the broker needs others to come up too.
func (p *Proc) Launch(t testing.TB) {
	t.Helper()
	if p.Running() && p.cmd != nil {
		p.kill()
	}
	p.launch(t)
}

// NodeID is the broker's node ID in a Cluster (0 for Start).
func (p *Proc) NodeID() int32 { return p.nodeID }

// Pause freezes the broker and its plugin processes with SIGSTOP, as a
// long GC pause or a hung host would.
func (p *Proc) Pause() error {
	if p.cmd == nil || !p.Running() {
		return fmt.Errorf("daemontest: pause: not running")
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP)
}

// Cont resumes a paused broker with SIGCONT.
func (p *Proc) Cont() error {
	if p.cmd == nil || !p.Running() {
		return fmt.Errorf("daemontest: cont: not running")
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
}

// PortOf returns the port of a host:port address.
func PortOf(addr string) int {
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// PauseBroker freezes only the vltavad process with SIGSTOP, leaving its
// plugin processes (the raft metadata voter among them) running: the
// broker is down while the metadata quorum keeps its majority. Cont
// resumes it.
func (p *Proc) PauseBroker() error {
	if p.cmd == nil || !p.Running() {
		return fmt.Errorf("daemontest: pause: not running")
	}
	return p.cmd.Process.Signal(syscall.SIGSTOP)
}
