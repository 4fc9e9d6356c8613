// Package testport hands out loopback TCP ports for servers that tests
// start as separate processes, which must be told their port before they
// bind it (daemontest's brokers, the ZooKeeper and etcd servers of
// plugins/metastore/internal/servertest, and the nodes `vltava cluster
// up` starts).
//
// Picking a port by binding port 0 and closing the listener races: the
// kernel hands the same ephemeral port to the next port-0 bind or
// outgoing connection, in this process or any other, before the server
// binds it. Reserve avoids that three ways:
//
//   - it picks ports below the kernel's ephemeral range
//     (net.ipv4.ip_local_port_range), which port-0 binds and outgoing
//     connections never use;
//   - it never hands out a port twice in one process;
//   - it holds an flock(2) on a file named for the port in
//     $TMPDIR/vltava-test-ports for the rest of the process, so test
//     processes running side by side (go test runs packages in
//     parallel) never pick the same port; the kernel drops the lock when
//     the process exits, however it exits.
//
// Finally it binds the port once to skip ports unrelated programs hold.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var state struct {
	mu    sync.Mutex
	taken map[int]*os.File // ports handed out, with their lock files
	lo    int              // the range ports are picked from, [lo, hi)
	hi    int
}

// defaultLo and defaultHi bound the range when the ephemeral range is
// unknown; Linux's default ephemeral range starts at 32768.
const (
	defaultLo = 20000
	defaultHi = 32768
)

func initRangeLocked() {
	if state.taken != nil {
		return
	}
	state.taken = make(map[int]*os.File)
	state.lo, state.hi = defaultLo, defaultHi
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return
	}
	ephLo, err1 := strconv.Atoi(f[0])
	ephHi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return
	}
	switch {
	case ephLo >= 12000: // room below the ephemeral range
		state.lo, state.hi = max(ephLo-12000, 10000), ephLo
	case ephHi <= 53000: // room above it
		state.lo, state.hi = ephHi+1, 65536
	}
}

// Reserve returns "127.0.0.1:PORT" for a port that no other caller of
// Reserve, in this process or another, gets while this process lives,
// and that was free a moment ago.
func Reserve() (string, error) { return ReserveOn("127.0.0.1") }

// ReserveOn is Reserve for a server that listens on host ("HOST:PORT";
// the free check binds host). The port is kept from every other caller
// of Reserve or ReserveOn, whatever its host.
func ReserveOn(host string) (string, error) {
	state.mu.Lock()
	defer state.mu.Unlock()
	initRangeLocked()
	dir := filepath.Join(os.TempDir(), "vltava-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("testport: %w", err)
	}
	n := state.hi - state.lo
	start := rand.IntN(n)
	for i := range n {
		port := state.lo + (start+i)%n
		if _, ok := state.taken[port]; ok {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return "", fmt.Errorf("testport: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // another process holds it
			continue
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			// Someone else's: keep the lock so no test process tries it.
			state.taken[port] = f
			continue
		}
		ln.Close()
		state.taken[port] = f
		return addr, nil
	}
	return "", fmt.Errorf("testport: no free port in [%d, %d)", state.lo, state.hi)
}
