package target

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest/testport"
)

// Vltava starts vltavad processes, each on a free loopback port with its
// own temporary data directory.
type Vltava struct {
	Bin string // the vltavad binary
}

// Name implements Target.
func (*Vltava) Name() string { return "vltava" }

// Facts implements Target. Clusters of several brokers form a raft
// metadata quorum among themselves (--quorum-voters) and replicate; a
// cluster of two brokers also gets one controller-only voter
// (--process-roles controller), so its quorum has three voters and
// survives the loss of either broker, as a Kafka cluster with separate
// KRaft controllers does.
func (*Vltava) Facts() Caps {
	return Caps{"kill9": true, "stop": true, "restart": true, "rawtcp": true,
		"multibroker": true, "replication": true, "faults": false, "brokerconfig": true,
		"sasl": true}
}

// Software implements softwarer: the binary's module version and VCS
// revision, from its build information.
func (v *Vltava) Software() string {
	s := "vltavad"
	bi, err := buildinfo.ReadFile(v.Bin)
	if err != nil {
		return s + " (no build information)"
	}
	s += " " + bi.Main.Path + " " + bi.Main.Version
	for _, st := range bi.Settings {
		switch {
		case st.Key == "vcs.revision" && len(st.Value) >= 12:
			s += " " + st.Value[:12]
		case st.Key == "vcs.modified" && st.Value == "true":
			s += "+modified"
		}
	}
	return s + " (" + bi.GoVersion + ")"
}

// quorumSize is the smallest metadata quorum a multi-broker cluster
// gets: brokers short of it are made up by controller-only voters.
const quorumSize = 3

// Start implements Target. Brokers are node 1..N; with N > 1 each also
// gets a free quorum port and all are voters, joined by controller-only
// voters (node N+1...) up to quorumSize.
func (v *Vltava) Start(ctx context.Context, o Options) (Cluster, error) {
	if o.ACLs && !o.SASL {
		return nil, fmt.Errorf("%w: ACLs need a SASL cluster on the vltava target", ErrUnsupported)
	}
	n := max(o.Brokers, 1)
	controllers := 0
	if n > 1 && n < quorumSize {
		controllers = quorumSize - n
	}
	dir, err := os.MkdirTemp("", "vltava-conformance-")
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	c := &vltavaCluster{dir: dir, procs: map[int32]*proc{}, ctrls: map[int32]*proc{}}
	var common []string
	config := o.Config
	if o.SASL {
		config = saslConfig(o)
	}
	if len(config) > 0 {
		cfg := filepath.Join(dir, "broker.yaml")
		if err := writeYAML(cfg, config); err != nil {
			c.Close()
			return nil, err
		}
		common = append(common, "--config", cfg)
	}
	var voters []string
	if n > 1 {
		for id := 1; id <= n+controllers; id++ {
			addr, err := freeAddr()
			if err != nil {
				c.Close()
				return nil, err
			}
			voters = append(voters, fmt.Sprintf("%d@%s", id, addr))
		}
	}
	errs := make(chan error, n+controllers)
	var mu sync.Mutex
	for id := n + 1; id <= n+controllers; id++ {
		_, quorum, _ := strings.Cut(voters[id-1], "@")
		args := []string{"--process-roles", "controller", "--node-id", fmt.Sprint(id),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", id)), "--log-level", "debug",
			"--quorum-listen", quorum, "--quorum-voters", strings.Join(voters, ",")}
		args = append(args, common...)
		go func() { // ready when its quorum port accepts
			p := &proc{bin: v.Bin, addr: quorum, logPath: filepath.Join(dir, fmt.Sprintf("vltavad-controller-%d.log", id)), args: args}
			err := p.start(ctx)
			mu.Lock()
			c.ctrls[int32(id)] = p
			mu.Unlock()
			errs <- err
		}()
	}
	for id := 1; id <= n; id++ {
		args := []string{"--node-id", fmt.Sprint(id), "--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", id)), "--log-level", "debug"}
		if n > 1 {
			_, quorum, _ := strings.Cut(voters[id-1], "@")
			args = append(args, "--quorum-listen", quorum, "--quorum-voters", strings.Join(voters, ","))
		}
		args = append(args, common...)
		go func() { // brokers start together: a quorum needs a majority
			p, err := startProc(ctx, v.Bin, filepath.Join(dir, fmt.Sprintf("vltavad-%d.log", id)), o.SASL, args)
			if p != nil {
				mu.Lock()
				c.procs[int32(id)] = p
				mu.Unlock()
			}
			errs <- err
		}()
	}
	var firstErr error
	for range n + controllers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		// A process that exited after its port first accepted (someone
		// else answered there, or a quorum bind failed) fails the start
		// now, with its log, not as a cluster short of a broker later.
		for _, p := range c.all() {
			if !p.running() {
				b, _ := os.ReadFile(p.logPath)
				firstErr = fmt.Errorf("target: vltavad exited during cluster start; log:\n%s", b)
				break
			}
		}
	}
	if firstErr == nil && o.SASL {
		firstErr = c.createUsers(ctx, o.Users)
	}
	if firstErr != nil {
		c.Close()
		return nil, firstErr
	}
	return c, nil
}

// all is every process of the cluster, brokers and controllers.
func (c *vltavaCluster) all() []*proc {
	var ps []*proc
	for _, p := range c.procs {
		ps = append(ps, p)
	}
	for _, p := range c.ctrls {
		ps = append(ps, p)
	}
	return ps
}

// saslConfig is o.Config with the keys of a SASL cluster: clients reach
// a SASL_PLAINTEXT listener (PLAIN and SCRAM from the simple
// authenticator); the brokers reach each other on a PLAINTEXT listener
// named INTERNAL that only the target knows, where they are
// User:ANONYMOUS, a superuser with the suite's admin. With ACLs the acl
// authorizer decides, with no ACL meaning no access.
func saslConfig(o Options) map[string]string {
	cfg := map[string]string{}
	for k, v := range o.Config {
		cfg[k] = v
	}
	cfg["listener.security.protocol.map"] = "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT"
	cfg["inter.broker.listener.name"] = "INTERNAL"
	cfg["sasl.authenticators"] = "simple"
	if o.ACLs {
		cfg["authorizer"] = "acl"
		cfg["super.users"] = "User:" + Superuser + ";User:ANONYMOUS"
	}
	return cfg
}

// createUsers stores SCRAM credentials for the superuser and users
// through a broker's INTERNAL listener (the simple authenticator checks
// PLAIN passwords against them), retrying until the cluster can.
func (c *vltavaCluster) createUsers(ctx context.Context, users map[string]string) error {
	var addrs []string
	for _, p := range c.procs {
		addrs = append(addrs, p.internal)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer cl.Close()
	up := []kadm.UpsertSCRAM{{User: Superuser, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: SuperuserPassword}}
	for u, p := range users {
		up = append(up, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: p})
	}
	for {
		res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, up)
		if err == nil {
			err = res.Error()
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("target: creating the SASL users: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freeAddr picks a loopback port for a broker to bind; testport keeps
// other test processes and port-0 binds off it.
func freeAddr() (string, error) {
	return testport.Reserve()
}

func writeYAML(path string, cfg map[string]string) error {
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %q\n", k, cfg[k])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	return nil
}

type vltavaCluster struct {
	dir   string
	procs map[int32]*proc // brokers
	ctrls map[int32]*proc // controller-only voters
}

func (c *vltavaCluster) Bootstrap() []string {
	var addrs []string
	for _, p := range c.procs {
		addrs = append(addrs, p.addr)
	}
	sort.Strings(addrs)
	return addrs
}

func (c *vltavaCluster) node(id int32) (*proc, error) {
	p := c.procs[id]
	if p == nil {
		return nil, fmt.Errorf("target: no broker %d", id)
	}
	return p, nil
}

func (c *vltavaCluster) Kill9(id int32) error {
	p, err := c.node(id)
	if err != nil {
		return err
	}
	p.kill()
	return nil
}

func (c *vltavaCluster) Stop(id int32) error { return c.signal(id, syscall.SIGSTOP) }
func (c *vltavaCluster) Cont(id int32) error { return c.signal(id, syscall.SIGCONT) }
func (c *vltavaCluster) signal(id int32, s syscall.Signal) error {
	p, err := c.node(id)
	if err != nil {
		return err
	}
	if !p.running() {
		return fmt.Errorf("target: broker %d is not running", id)
	}
	return syscall.Kill(-p.cmd.Process.Pid, s)
}

func (c *vltavaCluster) Restart(id int32) error {
	p, err := c.node(id)
	if err != nil {
		return err
	}
	if err := p.stop(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.start(ctx)
}

// Log returns broker id's output so far, for failure reports.
func (c *vltavaCluster) Log(id int32) string {
	p := c.procs[id]
	if p == nil {
		return ""
	}
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Alive reports whether broker id's process is running (not crashed).
func (c *vltavaCluster) Alive(id int32) bool {
	p := c.procs[id]
	return p != nil && p.running()
}

func (c *vltavaCluster) Close() error {
	for _, p := range c.procs {
		p.kill()
	}
	for _, p := range c.ctrls {
		p.kill()
	}
	return os.RemoveAll(c.dir)
}

// proc is one vltavad process and how to start it again.
type proc struct {
	bin, addr, logPath string
	internal           string // the INTERNAL listener of a SASL cluster's broker
	args               []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returns
}

// startProc starts a broker on a free port; with sasl its listeners are
// SASL_PLAINTEXT there and INTERNAL (PLAINTEXT) on a second free port.
func startProc(ctx context.Context, bin, logPath string, sasl bool, args []string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &proc{bin: bin, addr: addr, logPath: logPath}
	listen := addr
	if sasl {
		if p.internal, err = freeAddr(); err != nil {
			return nil, err
		}
		listen = "SASL_PLAINTEXT://" + addr + ",INTERNAL://" + p.internal
	}
	p.args = append([]string{"--listen", listen}, args...)
	if err := p.start(ctx); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

func (p *proc) start(ctx context.Context) error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	fmt.Fprintf(log, "--- %s %s\n", p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill reaches plugins too
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("target: start vltavad: %w", err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() { // owned by p: kill and stop wait for it through exited
		cmd.Wait()
		log.Close()
		close(exited)
	}()
	for {
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(p.logPath)
			return fmt.Errorf("target: vltavad exited before serving; log:\n%s", b)
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("target: vltavad not serving on %s: %w", p.addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process group and waits for the exit.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM (and SIGCONT, in case it was stopped) and waits up
// to 30s before SIGKILL.
func (p *proc) stop() error {
	if !p.running() {
		return nil
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	select {
	case <-p.exited:
		p.kill()
		return nil
	case <-time.After(30 * time.Second):
		p.kill()
		return errors.New("target: vltavad ignored SIGTERM for 30s; killed")
	}
}
