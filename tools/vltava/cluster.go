package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var clusterCommands = []command{
	{path: "cluster up", summary: "start a local cluster of vltavad brokers (ports and data dirs printed; Ctrl-C stops it)", run: runClusterUp},
}

// clusterNode is one broker (or controller-only voter) that cluster up
// started.
type clusterNode struct {
	id           int
	controller   bool // process.roles=controller: no Kafka listener
	addr, quorum string
	dataDir, log string
	cmd          *exec.Cmd
	done         chan error
}

// runClusterUp starts n brokers (and --controllers controller-only
// voters) as one cluster and waits for a signal (ctx ends), then stops
// them with SIGTERM (SIGKILL after 30s). Every broker is a voter of the
// metadata quorum too; the controllers make the quorum larger, so that
// two brokers plus one controller survive the loss of either broker.
func runClusterUp(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	n := f.Int("n", 3, "number of brokers")
	controllers := f.Int("controllers", 0, "extra controller-only quorum voters (`N`; vltavad --process-roles controller, node IDs after the brokers')")
	dir := f.String("dir", "", "parent `DIR` of the brokers' data dirs (default: a new temp dir, kept)")
	vltavad := f.String("vltavad", "", "vltavad binary (default: vltavad on PATH, else go build)")
	host := f.String("host", "127.0.0.1", "`HOST` to listen on")
	basePort := f.Int("port", 0, "first Kafka `PORT` (brokers take PORT, PORT+1, ...; quorum ports PORT+100+i); 0 picks free ports")
	var extra listFlag
	f.Var(&extra, "c", "extra broker config `key=value` for every broker (repeatable)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("%w: -n must be at least 1", errUsage)
	}
	if *controllers < 0 {
		return fmt.Errorf("%w: --controllers must not be negative", errUsage)
	}
	kvs, err := keyValues(extra)
	if err != nil {
		return fmt.Errorf("%w: -c: %v", errUsage, err)
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "vltava-cluster-"); err != nil {
			return err
		}
	}
	if *vltavad == "" {
		if *vltavad, err = findVltavad(*dir); err != nil {
			return err
		}
	}
	nodes, err := planCluster(*n, *controllers, *host, *basePort, *dir)
	if err != nil {
		return err
	}
	var voters []string
	for _, nd := range nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", nd.id, nd.quorum))
	}
	for _, nd := range nodes {
		if err := nd.start(*vltavad, strings.Join(voters, ","), kvs); err != nil {
			stopCluster(nodes)
			return err
		}
	}
	fmt.Fprintf(e.stdout, "cluster of %d brokers and %d controllers (vltavad %s)\n", *n, *controllers, *vltavad)
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
	fmt.Fprintf(e.stdout, "bootstrap: %s\nCtrl-C stops the cluster.\n", strings.Join(addrs, ","))
	failed := make(chan *clusterNode, len(nodes))
	for _, nd := range nodes {
		go func() {
			err := <-nd.done
			nd.done <- err // keep it for stopCluster
			failed <- nd
		}()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(e.stdout, "stopping the cluster...")
		stopCluster(nodes)
		return nil
	case nd := <-failed:
		if ctx.Err() != nil {
			stopCluster(nodes)
			return nil
		}
		stopCluster(nodes)
		return fmt.Errorf("node %d exited; see %s", nd.id, nd.log)
	}
}

// planCluster picks addresses and directories for n brokers (node IDs
// 1..n) and then controllers controller-only voters (n+1...).
func planCluster(n, controllers int, host string, basePort int, dir string) ([]*clusterNode, error) {
	pick := func(i, offset int) (string, error) {
		if basePort > 0 {
			return net.JoinHostPort(host, strconv.Itoa(basePort+offset+i)), nil
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", err
		}
		defer ln.Close()
		return ln.Addr().String(), nil
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
		nd := &clusterNode{id: i + 1, addr: addr, quorum: quorum, done: make(chan error, 1),
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

func (nd *clusterNode) start(bin, voters string, kvs [][2]string) error {
	if err := os.MkdirAll(nd.dataDir, 0o755); err != nil {
		return err
	}
	args := []string{"--node-id", strconv.Itoa(nd.id), "--data-dir", nd.dataDir,
		"--quorum-listen", nd.quorum, "--quorum-voters", voters}
	if nd.controller {
		args = append(args, "--process-roles", "controller")
	} else {
		args = append(args, "--listen", nd.addr)
	}
	if len(kvs) > 0 {
		var b strings.Builder
		for _, kv := range kvs {
			fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
		}
		cfg := nd.dataDir + ".properties"
		if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
			return err
		}
		args = append(args, "--config", cfg)
	}
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start broker %d: %w", nd.id, err)
	}
	nd.cmd = cmd // only a started process: stopCluster waits for it
	go func() {
		nd.done <- cmd.Wait()
		logf.Close()
	}()
	return nil
}

// stopCluster sends SIGTERM to every broker and waits; a broker still up
// after 30s is killed with its plugin processes.
func stopCluster(nodes []*clusterNode) {
	for _, nd := range nodes {
		if nd.cmd != nil && nd.cmd.Process != nil {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(30 * time.Second)
	for _, nd := range nodes {
		if nd.cmd == nil {
			continue
		}
		select {
		case <-nd.done:
		case <-deadline:
		}
		err := syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			continue
		}
	}
}
