package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/vltava/vltava/daemon/daemontest/testport"
)

var clusterCommands = []command{
	{path: "cluster up", summary: "start a local cluster of vltavad brokers; type kill N, restart N or stop (Ctrl-C stops it too)", run: runClusterUp},
	{path: "cluster kill", args: "N", summary: "kill -9 node N of the running cluster up (as a crash would)", run: runClusterControl},
	{path: "cluster restart", args: "N", summary: "restart node N of the running cluster up (killing it first if it runs)", run: runClusterControl},
	{path: "cluster stop", summary: "stop the running cluster up", run: runClusterControl},
}

// clusterNode is one broker (or controller-only voter) that cluster up
// started.
type clusterNode struct {
	id           int
	controller   bool // process.roles=controller: no Kafka listener
	addr, quorum string
	dataDir, log string
	args         []string
	cmd          *exec.Cmd  // the current run; nil before the first start
	done         chan error // the current run's exit; nil when not running
	// stopping is the run that kill or stopAll ended on purpose: its
	// exit is no news.
	stopping atomic.Pointer[exec.Cmd]
}

// nodeExit is a run of a node that ended on its own.
type nodeExit struct {
	nd  *clusterNode
	cmd *exec.Cmd
}

func (nd *clusterNode) name() string {
	if nd.controller {
		return fmt.Sprintf("controller %d", nd.id)
	}
	return fmt.Sprintf("broker %d", nd.id)
}

// clusterControlFile is the control socket's name in the cluster dir;
// currentClusterFile (in the temp dir) names the dir of the cluster up
// running last, for cluster kill|restart|stop without --dir.
const clusterControlFile = "control.sock"

func currentClusterFile() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("vltava-cluster-%d.current", os.Getuid()))
}

// plural is "1 broker", "2 brokers".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// runClusterUp starts n brokers (and --controllers controller-only
// voters) as one cluster and serves commands until stop or a signal,
// then stops them with SIGTERM (SIGKILL after 30s). A node that exits is
// reported and the others keep running. Commands come from stdin (a line
// each) and from the control socket in the cluster dir, which cluster
// kill|restart|stop use.
func runClusterUp(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	n := f.Int("n", 3, "number of brokers")
	controllers := f.Int("controllers", 0, "extra controller-only quorum voters (`N`; vltavad --process-roles controller, node IDs after the brokers')")
	dir := f.String("dir", "", "parent `DIR` of the nodes' data dirs and logs (default: a new temp dir, removed at stop unless --keep)")
	keep := f.Bool("keep", false, "keep the temp dir at stop")
	vltavad := f.String("vltavad", "", "vltavad binary (default: next to vltava, on PATH, else built once into the user cache dir)")
	host := f.String("host", "127.0.0.1", "`HOST` to listen on")
	basePort := f.Int("port", 0, "first Kafka `PORT` (brokers take PORT, PORT+1, ...; quorum ports PORT+100+i); 0 picks free ports below the ephemeral range")
	var extra listFlag
	f.Var(&extra, "c", "extra broker config `key=value` for every broker (repeatable)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *n < 1 {
		return usagef("-n must be at least 1")
	}
	if *controllers < 0 {
		return usagef("--controllers must not be negative")
	}
	kvs, err := keyValues(extra)
	if err != nil {
		return usagef("-c: %v", err)
	}
	if *vltavad == "" {
		if *vltavad, err = locateVltavad(); err != nil {
			return err
		}
	}
	tempDir := false
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "vltava-cluster-"); err != nil {
			return err
		}
		tempDir = !*keep
	}
	nodes, err := planCluster(*n, *controllers, *host, *basePort, *dir)
	if err != nil {
		return err
	}
	var voters []string
	for _, nd := range nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", nd.id, nd.quorum))
	}
	cl := &cluster{nodes: nodes, out: e.stdout, bin: *vltavad, exits: make(chan nodeExit, len(nodes))}
	for _, nd := range nodes {
		if err := nd.prepare(strings.Join(voters, ","), kvs); err != nil {
			return err
		}
		if err := cl.start(nd); err != nil {
			cl.stopAll()
			return err
		}
	}
	ctl, err := listenControl(*dir)
	if err != nil {
		cl.stopAll()
		return err
	}
	defer ctl.Close()
	_ = os.WriteFile(currentClusterFile(), []byte(*dir+"\n"), 0o644)
	defer removeIfCurrent(*dir)

	fmt.Fprintf(e.stdout, "cluster of %s and %s (vltavad %s)\n", plural(*n, "broker"), plural(*controllers, "controller"), *vltavad)
	if len(nodes) == 2 {
		fmt.Fprintln(e.stdout, "note: a quorum of 2 voters stops when either is down; --controllers 1 makes it 3")
	}
	var addrs []string
	for _, nd := range nodes {
		if nd.controller {
			fmt.Fprintf(e.stdout, "  controller %d  quorum %s  data %s  log %s\n", nd.id, nd.quorum, nd.dataDir, nd.log)
			continue
		}
		fmt.Fprintf(e.stdout, "  broker %d  kafka %s  quorum %s  data %s  log %s\n", nd.id, nd.addr, nd.quorum, nd.dataDir, nd.log)
		addrs = append(addrs, nd.addr)
	}
	if err := waitBrokers(ctx, e, addrs); err != nil {
		fmt.Fprintf(e.stdout, "warning: %v; see the logs\n", err)
	}
	fmt.Fprintf(e.stdout, "bootstrap: %s\n", strings.Join(addrs, ","))
	fmt.Fprintf(e.stdout, "commands: kill N, restart N, stop (here, or vltava cluster kill|restart|stop from another terminal); Ctrl-C stops the cluster.\n")

	cmds := make(chan clusterCmd)
	quit := make(chan struct{}) // closed when the command loop ends
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned here: ends when ctl closes, waited for below
		defer wg.Done()
		serveControl(ctl, cmds, quit)
	}()
	// The stdin reader cannot be interrupted in its read; it ends when
	// stdin does or at its next line after quit, and is not waited for.
	go readCommands(e.stdin, cmds, quit)

	defer func() {
		close(quit)
		ctl.Close()
		wg.Wait()
		if tempDir {
			if err := os.RemoveAll(*dir); err == nil {
				fmt.Fprintf(e.stdout, "removed %s (--keep keeps it)\n", *dir)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(e.stdout, "stopping the cluster...")
			cl.stopAll()
			return nil
		case ex := <-cl.exits:
			cl.reportExit(ex)
		case cmd := <-cmds:
			reply, stop := cl.do(cmd.line)
			fmt.Fprintln(e.stdout, reply)
			if cmd.reply != nil {
				cmd.reply <- reply
			}
			if stop {
				cl.stopAll()
				return nil
			}
		}
	}
}

// waitBrokers waits (up to --timeout) until every broker serves Kafka
// and the cluster's metadata lists them all, so that the first command
// the user types finds the whole cluster.
func waitBrokers(ctx context.Context, e *env, addrs []string) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	for _, addr := range addrs {
		sub := &env{stdin: e.stdin, stdout: e.stdout, stderr: e.stderr, bootstrap: addr, timeout: e.timeout}
		for {
			err := sub.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
				md, err := adm.BrokerMetadata(ctx)
				if err == nil && len(md.Brokers) < len(addrs) {
					err = fmt.Errorf("%s knows %d of %d brokers", addr, len(md.Brokers), len(addrs))
				}
				return err
			})
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("not every broker is serving after %s: %v", e.timeout, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// cluster is the nodes of a cluster up and what runs them. Only the
// command loop of runClusterUp calls its methods.
type cluster struct {
	nodes []*clusterNode
	out   io.Writer
	bin   string
	exits chan nodeExit // a run that ended on its own
}

// clusterCmd is one command line, from stdin (reply nil) or the control
// socket.
type clusterCmd struct {
	line  string
	reply chan<- string
}

func (cl *cluster) node(arg string) (*clusterNode, error) {
	id, err := strconv.Atoi(arg)
	if err != nil || id < 1 || id > len(cl.nodes) {
		return nil, fmt.Errorf("no node %q: want 1 to %d", arg, len(cl.nodes))
	}
	return cl.nodes[id-1], nil
}

// do runs one command and returns its reply, and whether to stop.
func (cl *cluster) do(line string) (reply string, stop bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "commands: kill N, restart N, stop", false
	}
	switch {
	case fields[0] == "stop" && len(fields) == 1:
		return "stopping the cluster...", true
	case (fields[0] == "kill" || fields[0] == "restart") && len(fields) == 2:
		nd, err := cl.node(fields[1])
		if err != nil {
			return err.Error(), false
		}
		if fields[0] == "kill" {
			if !cl.running(nd) {
				return nd.name() + " is not running", false
			}
			cl.kill(nd)
			return fmt.Sprintf("killed %s (kill -9); restart %d starts it again", nd.name(), nd.id), false
		}
		if cl.running(nd) {
			cl.kill(nd)
		}
		if err := cl.start(nd); err != nil {
			return fmt.Sprintf("restart %s: %v", nd.name(), err), false
		}
		return fmt.Sprintf("restarted %s (pid %d)", nd.name(), nd.cmd.Process.Pid), false
	}
	return fmt.Sprintf("unknown command %q: want kill N, restart N or stop", line), false
}

func (cl *cluster) running(nd *clusterNode) bool { return nd.done != nil }

// start runs nd once more; when the run ends on its own, it goes to exits.
func (cl *cluster) start(nd *clusterNode) error {
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(cl.bin, nd.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", nd.name(), err)
	}
	done := make(chan error, 1)
	nd.cmd, nd.done = cmd, done
	go func() { // owned by the cluster: kill and stopAll wait for done
		err := cmd.Wait()
		logf.Close()
		done <- err
		if nd.stopping.Load() != cmd {
			cl.exits <- nodeExit{nd: nd, cmd: cmd}
		}
	}()
	return nil
}

// kill sends SIGKILL to nd's process group and waits for it.
func (cl *cluster) kill(nd *clusterNode) {
	nd.stopping.Store(nd.cmd)
	_ = syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
	<-nd.done
	nd.done = nil
}

// reportExit says that a node exited on its own; the others keep running.
// An exit of a run that was replaced since is no news.
func (cl *cluster) reportExit(ex nodeExit) {
	nd := ex.nd
	if nd.cmd != ex.cmd || nd.done == nil {
		return
	}
	err := <-nd.done
	nd.done = nil
	_ = syscall.Kill(-ex.cmd.Process.Pid, syscall.SIGKILL) // its plugins, if any are left
	how := "exited"
	if err != nil {
		how = "exited (" + err.Error() + ")"
	}
	fmt.Fprintf(cl.out, "%s %s; see %s. The others keep running; restart %d starts it again.\n", nd.name(), how, nd.log, nd.id)
}

// stopAll stops the brokers one at a time, then the controller-only
// voters: SIGTERM, and SIGKILL for one still up after 30s, with its plugin
// processes. One at a time, each broker's controlled shutdown finds the
// others (and the quorum) up to take its leaderships, as Kafka's rolling
// stop does; brokers stopping together wait on each other.
func (cl *cluster) stopAll() {
	var controllers []*clusterNode
	for _, nd := range cl.nodes {
		if nd.done == nil {
			continue
		}
		if nd.controller {
			controllers = append(controllers, nd)
			continue
		}
		cl.stop(nd)
	}
	for _, nd := range controllers {
		nd.stopping.Store(nd.cmd)
		_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, nd := range controllers {
		cl.waitStopped(nd)
	}
}

// stop sends nd SIGTERM and waits for it (see waitStopped).
func (cl *cluster) stop(nd *clusterNode) {
	nd.stopping.Store(nd.cmd)
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	cl.waitStopped(nd)
}

// waitStopped waits up to 30s for nd to exit after SIGTERM, then kills
// its process group.
func (cl *cluster) waitStopped(nd *clusterNode) {
	select {
	case <-nd.done:
	case <-time.After(30 * time.Second):
		fmt.Fprintf(cl.out, "%s did not stop within 30s of SIGTERM; killed (see %s)\n", nd.name(), nd.log)
	}
	_ = syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
	nd.done = nil
}

// planCluster picks addresses and directories for n brokers (node IDs
// 1..n) and then controllers controller-only voters (n+1...).
func planCluster(n, controllers int, host string, basePort int, dir string) ([]*clusterNode, error) {
	pick := func(i, offset int) (string, error) {
		if basePort > 0 {
			return net.JoinHostPort(host, strconv.Itoa(basePort+offset+i)), nil
		}
		// Not a port-0 bind released at once: the kernel may hand that
		// port to another bind or an outgoing connection before the
		// node binds it. testport picks below the ephemeral range and
		// keeps the port from every other caller (other clusters, test
		// processes) while this process lives.
		return testport.ReserveOn(host)
	}
	var nodes []*clusterNode
	for i := range n + controllers {
		addr, err := pick(i, 0)
		if err != nil {
			return nil, err
		}
		quorum, err := pick(i, 100)
		if err != nil {
			return nil, err
		}
		nd := &clusterNode{id: i + 1, addr: addr, quorum: quorum,
			dataDir: filepath.Join(dir, fmt.Sprintf("broker-%d", i+1))}
		if i >= n {
			nd.controller, nd.addr = true, ""
			nd.dataDir = filepath.Join(dir, fmt.Sprintf("controller-%d", i+1))
		}
		nd.log = nd.dataDir + ".log"
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

// prepare makes nd's data dir and config file and settles its arguments.
func (nd *clusterNode) prepare(voters string, kvs [][2]string) error {
	if err := os.MkdirAll(nd.dataDir, 0o755); err != nil {
		return err
	}
	nd.args = []string{"--node-id", strconv.Itoa(nd.id), "--data-dir", nd.dataDir,
		"--quorum-listen", nd.quorum, "--quorum-voters", voters}
	if nd.controller {
		nd.args = append(nd.args, "--process-roles", "controller")
	} else {
		nd.args = append(nd.args, "--listen", nd.addr)
	}
	for _, kv := range kvs {
		nd.args = append(nd.args, "--override", kv[0]+"="+kv[1])
	}
	return nil
}

// listenControl listens on the cluster dir's control socket.
func listenControl(dir string) (net.Listener, error) {
	path := filepath.Join(dir, clusterControlFile)
	_ = os.Remove(path) // a stale socket of an earlier run
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// serveControl answers one command per connection until ln closes.
func serveControl(ln net.Listener, cmds chan<- clusterCmd, quit <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return
			}
			reply := make(chan string, 1)
			select {
			case cmds <- clusterCmd{line: strings.TrimSpace(line), reply: reply}:
			case <-quit:
				fmt.Fprintln(conn, "the cluster is stopping")
				return
			}
			select {
			case r := <-reply:
				fmt.Fprintln(conn, r)
			case <-quit:
			}
		}()
	}
}

// readCommands sends each stdin line as a command until stdin ends.
func readCommands(r io.Reader, cmds chan<- clusterCmd, quit <-chan struct{}) {
	if r == nil {
		return
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			select {
			case cmds <- clusterCmd{line: line}:
			case <-quit:
				return
			}
		}
	}
}

func removeIfCurrent(dir string) {
	if b, err := os.ReadFile(currentClusterFile()); err == nil && strings.TrimSpace(string(b)) == dir {
		os.Remove(currentClusterFile())
	}
}

// runClusterControl sends kill N, restart N or stop to the cluster up
// whose dir is --dir (default: the one started last).
func runClusterControl(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	dir := f.String("dir", "", "the cluster's `DIR` as cluster up printed it (default: the cluster up started last)")
	want := 1
	if c.path == "cluster stop" {
		want = 0
	}
	pos, err := f.parse(args, want, want)
	if err != nil {
		return err
	}
	if *dir == "" {
		b, err := os.ReadFile(currentClusterFile())
		if err != nil {
			return errors.New("no cluster up is running (or give --dir)")
		}
		*dir = strings.TrimSpace(string(b))
	}
	line := strings.TrimPrefix(c.path, "cluster ")
	if len(pos) > 0 {
		line += " " + pos[0]
	}
	d := net.Dialer{Timeout: e.timeout}
	conn, err := d.DialContext(ctx, "unix", filepath.Join(*dir, clusterControlFile))
	if err != nil {
		return fmt.Errorf("no cluster up answers in %s: %w", *dir, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(e.timeout + time.Minute))
	if _, err := fmt.Fprintln(conn, line); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("cluster up did not answer: %w", err)
	}
	fmt.Fprint(e.stdout, reply)
	if strings.HasPrefix(reply, "no node") || strings.HasPrefix(reply, "unknown command") || strings.Contains(reply, "is not running") {
		return errors.New(strings.TrimSpace(reply))
	}
	return nil
}
