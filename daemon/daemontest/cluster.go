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
// voters of the raft metadata quorum, optionally with controller-only
// voters (StartClusterWith).
//
//	c := daemontest.StartCluster(t, bin, 3, "--log-level", "debug")
//	c.Broker(2).Kill9()
//	c.Broker(2).Restart(t)
type Cluster struct {
	procs  []*Proc // brokers, node IDs 1..N
	ctrls  []*Proc // controller-only voters, node IDs N+1...
	voters string
}

// StartCluster starts n brokers at once (a quorum needs a majority, so
// none can be waited for alone) and returns when every one accepts
// connections. args are added to every broker's command line; it must not
// contain --listen, --node-id, --data-dir, --process-roles or the quorum
// flags. Every broker is killed when the test ends.
func StartCluster(t testing.TB, bin string, n int, args ...string) *Cluster {
	t.Helper()
	return StartClusterWith(t, bin, ClusterOptions{Brokers: n}, args...)
}

// ClusterOptions shapes a Cluster: Brokers brokers (node IDs 1..Brokers)
// and Controllers controller-only voters (process.roles=controller, node
// IDs after the brokers'). The voters are the brokers and the
// controllers, unless NonVoterBrokers makes the brokers
// process.roles=broker (raft non-voters): then only the controllers vote,
// as in Kafka's isolated mode. Two brokers and one controller make a
// three-voter quorum that survives the loss of any one process.
type ClusterOptions struct {
	Brokers         int
	Controllers     int
	NonVoterBrokers bool
	// Metrics gives every process a metrics listener (/metrics, /ui/) on
	// a port of its own (Proc.MetricsAddr); without it none has one.
	Metrics bool
	// ExternalStore leaves out --quorum-listen and --quorum-voters: the
	// brokers share a metadata store outside the cluster (ZooKeeper,
	// etcd), which args configure. It excludes Controllers.
	ExternalStore bool
}

// StartClusterWith starts the cluster o describes, every process at once,
// and returns when every one accepts connections (a controller on its
// quorum port). args are added to every command line, with the same
// restrictions as StartCluster. Every process is killed when the test
// ends.
func StartClusterWith(t testing.TB, bin string, o ClusterOptions, args ...string) *Cluster {
	t.Helper()
	for _, f := range []string{"listen", "node-id", "data-dir", "quorum-listen", "quorum-voters", "process-roles"} {
		if flagValue(args, f) != "" {
			t.Fatalf("daemontest.StartCluster sets --%s itself; drop it from %q", f, args)
		}
	}
	if o.ExternalStore && (o.Controllers > 0 || o.NonVoterBrokers) {
		t.Fatal("daemontest.StartClusterWith: an external store has no controllers or non-voters")
	}
	if o.NonVoterBrokers && o.Controllers == 0 {
		t.Fatal("daemontest.StartClusterWith: non-voter brokers need controllers")
	}
	c := &Cluster{}
	total := o.Brokers + o.Controllers
	quorum := make([]string, total)
	var vs []string
	for i := range total {
		quorum[i] = FreePort(t)
		if i >= o.Brokers || !o.NonVoterBrokers {
			vs = append(vs, fmt.Sprintf("%d@%s", i+1, quorum[i]))
		}
	}
	c.voters = strings.Join(vs, ",")
	for i := range total {
		p := &Proc{bin: bin, dataDir: t.TempDir(), nodeID: int32(i + 1)}
		p.logPath = filepath.Join(t.TempDir(), fmt.Sprintf("vltavad-%d.log", i+1))
		common := []string{"--node-id", strconv.Itoa(i + 1), "--data-dir", p.dataDir,
			"--metrics-listen="}
		if !o.ExternalStore {
			common = append(common, "--quorum-listen", quorum[i], "--quorum-voters", c.voters)
		}
		if o.Metrics {
			p.metricsAddr = FreePort(t)
			common[4] += p.metricsAddr
		}
		switch {
		case i >= o.Brokers: // ready when its quorum port accepts
			p.addr = quorum[i]
			p.args = append(append(common, "--process-roles", "controller"), args...)
			c.ctrls = append(c.ctrls, p)
		case o.NonVoterBrokers:
			p.addr = FreePort(t)
			p.args = append(append([]string{"--listen", p.addr, "--process-roles", "broker"}, common...), args...)
			c.procs = append(c.procs, p)
		default:
			p.addr = FreePort(t)
			p.args = append(append([]string{"--listen", p.addr}, common...), args...)
			c.procs = append(c.procs, p)
		}
		t.Cleanup(p.kill)
	}
	for _, p := range c.all() {
		p.launch(t)
	}
	for _, p := range c.ctrls {
		p.WaitReady(t)
	}
	c.WaitReady(t)
	// A process that exited after its port first accepted (a port
	// someone else answered on, a failed quorum bind) fails the start
	// here, not as a short Addrs later.
	for _, p := range c.all() {
		if !p.Running() {
			t.Fatalf("vltavad node %d exited during cluster start (%v); log:\n%s", p.nodeID, p.err, p.Log())
		}
	}
	return c
}

func (c *Cluster) all() []*Proc { return append(append([]*Proc(nil), c.procs...), c.ctrls...) }

// Controllers returns the controller-only voters, in node ID order; a
// controller's Addr is its quorum address.
func (c *Cluster) Controllers() []*Proc { return append([]*Proc(nil), c.ctrls...) }

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
