// Package daemontest runs vltavad as a real process in tests: it builds the
// binary once per test process, starts brokers on loopback ports chosen at
// run time with data in the test's temp dir, and kills whatever is left
// when the test ends.
//
//	func TestMain(m *testing.M) { daemontest.Main(m) } // removes the binary afterwards
//
//	bin := daemontest.Build(t)
//	p := daemontest.Start(t, bin, "--log-level", "debug")
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
//	p.Kill9()
//	p.Restart(t)
package daemontest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/daemon/daemontest/testport"
)

// StartTimeout bounds how long Start waits for the broker to accept TCP.
var StartTimeout = 30 * time.Second

// StopTimeout bounds how long Stop waits after SIGTERM before SIGKILL.
var StopTimeout = 30 * time.Second

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Build compiles ./daemon once per process and returns the binary's path.
// The binary lives in a temp dir that Main removes.
func Build(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "vltavad-bin-")
		if build.err != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		daemonDir := filepath.Dir(filepath.Dir(file))
		build.bin = filepath.Join(build.dir, "vltavad")
		args := []string{"build", "-o", build.bin}
		if invariant.Enabled {
			// The brokers under test check the same invariants as the
			// test binary that starts them.
			args = append(args, "-tags", "invariants")
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Dir = daemonDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build ./daemon: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// Main runs the tests, removes the binary Build made, and exits. Call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// Proc is one running vltavad process.
type Proc struct {
	bin     string
	args    []string // everything after the binary, including --listen and --data-dir
	addr    string
	dataDir string
	logPath string
	nodeID  int32 // in a Cluster

	metricsAddr string // the metrics listener, when the test asked for one

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returns
	err    error         // cmd.Wait's result, set before exited closes
	reaped bool          // the current run's process group was killed
}

// FreePort returns a loopback address for a server to bind: free a
// moment ago, never handed out twice by FreePort in any test process
// that lives, and outside the kernel's ephemeral range, so neither a
// port-0 bind nor an outgoing connection takes it first (see testport).
func FreePort(t testing.TB) string {
	t.Helper()
	addr, err := testport.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Start runs bin with --listen on a free loopback port, --data-dir in
// t.TempDir() unless args has one, no metrics listener unless args has
// --metrics-listen, and args. It returns once the port
// accepts connections, and kills the process when the test ends.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{bin: bin, addr: FreePort(t), logPath: filepath.Join(t.TempDir(), "vltavad.log")}
	p.dataDir = flagValue(args, "data-dir")
	if p.dataDir == "" {
		p.dataDir = t.TempDir()
		args = append([]string{"--data-dir", p.dataDir}, args...)
	}
	if flagValue(args, "listen") != "" {
		t.Fatalf("daemontest.Start picks the listen address itself; drop --listen from %q", args)
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "metrics-listen") }) {
		// Brokers under test run side by side: none takes the fixed
		// default metrics port unless the test asks for a listener.
		args = append([]string{"--metrics-listen="}, args...)
	}
	p.metricsAddr = flagValue(args, "metrics-listen")
	p.args = append([]string{"--listen", p.addr}, args...)
	t.Cleanup(p.kill)
	p.start(t)
	return p
}

// flagValue finds "--name V", "-name V", "--name=V" or "-name=V" in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		trimmed := strings.TrimLeft(a, "-")
		if trimmed == a {
			continue
		}
		if trimmed == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(trimmed, name+"="); ok {
			return v
		}
	}
	return ""
}

func (p *Proc) start(t testing.TB) {
	t.Helper()
	p.launch(t)
	p.WaitReady(t)
}

// launch starts the process without waiting for its port.
func (p *Proc) launch(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(log, "--- %s %s\n", p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so kill reaches any children (plugins) too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start vltavad: %v", err)
	}
	p.cmd, p.exited, p.reaped = cmd, make(chan struct{}), false
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
	}()
}

// WaitReady waits until the broker accepts TCP connections on Addr, and
// fails the test if it exits first or StartTimeout passes.
func (p *Proc) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("vltavad exited before accepting connections (%v); log:\n%s", p.err, p.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			t.Fatalf("vltavad did not accept connections on %s within %v; log:\n%s", p.addr, StartTimeout, p.Log())
		}
	}
}

// MetricsAddr is the process's metrics listener ("" when it has none).
func (p *Proc) MetricsAddr() string { return p.metricsAddr }

// Addr is the broker's host:port.
func (p *Proc) Addr() string { return p.addr }

// DataDir is the broker's data directory.
func (p *Proc) DataDir() string { return p.dataDir }

// Args is the full argument list the process runs with.
func (p *Proc) Args() []string { return slices.Clone(p.args) }

// Log returns everything the process (and earlier runs of it) wrote to
// stdout and stderr so far.
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process group (once per run) and waits for
// the process.
func (p *Proc) kill() {
	if p.cmd == nil || p.reaped {
		return
	}
	p.reaped = true
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// Kill9 kills the process and its group with SIGKILL, as a crash would.
func (p *Proc) Kill9() { p.kill() }

// Stop sends SIGTERM and waits for a clean exit. It returns an error if the
// process exited non-zero or needed SIGKILL after StopTimeout.
func (p *Proc) Stop() error {
	if !p.Running() {
		return p.exitErr()
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		p.kill() // anything the process started and left behind goes too
		return p.exitErr()
	case <-time.After(StopTimeout):
		p.kill()
		return fmt.Errorf("vltavad did not exit within %v of SIGTERM; killed", StopTimeout)
	}
}

func (p *Proc) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("vltavad: %w", p.err)
	}
	return nil
}

// Restart starts the process again with the same arguments, address and
// data directory. A still-running process is killed first.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	if p.Running() {
		p.kill()
	}
	p.start(t)
}

// Pid is the process ID of the running vltavad (0 before Start).
func (p *Proc) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill9Leader kills only the vltavad process with SIGKILL, leaving its
// children (plugin processes) to notice on their own, as they must when
// the broker crashes. The cleanup still kills the whole process group, so
// a child that fails to exit does not outlive the test.
func (p *Proc) Kill9Leader() {
	if p.cmd == nil || !p.Running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}
