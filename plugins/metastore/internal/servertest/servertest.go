// Package servertest runs external store servers (ZooKeeper, etcd) for
// tests: loopback ports chosen at run time, one process group per server
// so kill -9 reaches every child, output captured in a file the test
// prints when it fails.
//
// Goroutines: Start runs one goroutine per process that waits for it to
// exit; Kill (and the t.Cleanup registered by Start) kills the process
// group and waits for that goroutine.
package servertest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vltava/vltava/daemon/daemontest/testport"
)

// FreePorts returns n distinct loopback TCP ports for servers to bind, from
// daemon/daemontest/testport: below the kernel's ephemeral range (so no
// port-0 bind or outgoing connection takes one before the server binds
// it), never handed out twice to test processes running side by side.
// Only a program outside the tests could take one meanwhile; the
// harnesses retry a start that fails.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		addr, err := testport.Reserve()
		if err != nil {
			t.Fatalf("servertest: reserve a port: %v", err)
		}
		_, port, _ := net.SplitHostPort(addr)
		if ports[i], err = strconv.Atoi(port); err != nil {
			t.Fatalf("servertest: port of %s: %v", addr, err)
		}
	}
	return ports
}

// Proc is a server process in its own process group.
type Proc struct {
	Name    string
	LogPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts name with args, output to a log file in dir. The process
// is killed when the test ends.
func Start(t testing.TB, dir, name string, args ...string) *Proc {
	t.Helper()
	logPath := filepath.Join(dir, filepath.Base(name)+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, killed as a whole; and killed with the test
	// binary if that dies without running cleanups (a test timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("servertest: start %s: %v", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("servertest: last output of %s:\n%s", name, p.Tail(40))
		}
	})
	return p
}

// Kill sends SIGKILL to the process group and waits for the process.
// Killing an exited process is a no-op.
func (p *Proc) Kill() {
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	select {
	case <-p.exited:
		return
	default:
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	<-p.exited
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Tail returns the last n lines of the process output.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitFor polls ready every 50 ms until it returns nil, the process
// exits, or limit passes.
func (p *Proc) WaitFor(limit time.Duration, ready func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("servertest: %s exited before it was ready (%v):\n%s", p.Name, err, p.Tail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servertest: %s not ready after %v: %v", p.Name, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
