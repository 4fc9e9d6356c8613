package wire

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTripMetadata sends a metadata request on c and checks the answer.
func roundTripMetadata(t *testing.T, c net.Conn, corr int32) {
	t.Helper()
	if _, err := c.Write(frame(metadataRequest(9, "x"), corr, "c")); err != nil {
		t.Fatal(err)
	}
	var md kmsg.MetadataResponse
	md.Version = 9
	if got := decodeResponse(t, readResponse(t, c), &md, true); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
}

// dialFrom connects to addr from a given loopback source address.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Beyond max.connections a new connection is closed at once with a log
// line; the open ones keep working, and a slot freed is usable again.
func TestMaxConnections(t *testing.T) {
	s, addr, logs := startServer(t, Config{MaxConnections: 2}, &apiHandler{})
	a, b := dial(t, addr), dial(t, addr)
	roundTripMetadata(t, a, 1)
	roundTripMetadata(t, b, 2)
	c := dial(t, addr)
	expectClosed(t, c)
	logs.waitFor(t, "connection refused: max.connections (2) reached")
	roundTripMetadata(t, a, 3)
	roundTripMetadata(t, b, 4)
	a.Close()
	waitStats(t, s, "closing a connection", func(st Stats) bool { return st.Conns == 1 })
	roundTripMetadata(t, dial(t, addr), 5)
	if st := s.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v: want 1 refused", st)
	}
}

// max.connections.per.ip counts per remote address, overrides replace it
// for their address, and refusals are logged at most once a second.
func TestMaxConnectionsPerIP(t *testing.T) {
	s, addr, logs := startServer(t, Config{
		MaxConnectionsPerIP: 1,
		MaxConnectionsPerIPOverrides: map[netip.Addr]int{
			netip.MustParseAddr("127.0.0.2"): 3,
			netip.MustParseAddr("127.0.0.3"): 0,
		},
	}, &apiHandler{})
	roundTripMetadata(t, dialFrom(t, "127.0.0.1", addr), 1)
	for i := range 3 {
		roundTripMetadata(t, dialFrom(t, "127.0.0.2", addr), int32(10+i))
	}
	expectClosed(t, dialFrom(t, "127.0.0.2", addr))
	logs.waitFor(t, "max.connections.per.ip (3) reached for 127.0.0.2")
	expectClosed(t, dialFrom(t, "127.0.0.3", addr))
	for range 20 {
		expectClosed(t, dialFrom(t, "127.0.0.1", addr))
	}
	if st := s.Stats(); st.Refused != 22 {
		t.Fatalf("stats %+v: want 22 refused", st)
	}
	// 22 refusals within well under a second or two: a handful of lines.
	if n := strings.Count(logs.String(), "connection refused"); n < 1 || n > 4 {
		t.Fatalf("%d log lines for 22 refusals; log:\n%s", n, logs)
	}
}

const emfileChildEnv = "WIRE_TEST_EMFILE_CHILD"

// When descriptors run out, accept fails with EMFILE: the server backs
// off instead of spinning, logs once for the burst, keeps serving the
// connections it has, and accepts again once descriptors are free. The
// server runs in a child process whose open-file limit is lowered, so the
// test's own descriptors are not at stake.
func TestAcceptEMFILE(t *testing.T) {
	if os.Getenv(emfileChildEnv) == "1" {
		emfileChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptEMFILE$")
	cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v; log:\n%s", err, logs)
	}
	addr := strings.TrimSpace(line)

	// More connections than the child has descriptors; each sends a
	// request. The kernel completes the handshakes of those the child
	// cannot accept; they wait in the backlog.
	const n = 60
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, addr)
		if _, err := conns[i].Write(frame(metadataRequest(9, "x"), int32(i), "c")); err != nil {
			t.Fatal(err)
		}
	}
	logs.waitFor(t, "accept failing")
	cpu0 := cpuTime(t, cmd.Process.Pid)
	time.Sleep(2 * time.Second)
	if used := cpuTime(t, cmd.Process.Pid) - cpu0; used > time.Second {
		t.Fatalf("the server used %v of CPU in 2s while descriptors were exhausted: spinning", used)
	}
	if k := strings.Count(logs.String(), "accept failing"); k != 1 {
		t.Fatalf("%d log lines for one burst of accept errors; log:\n%s", k, logs)
	}
	// The first connection was accepted before the limit: it is served.
	var md kmsg.MetadataResponse
	md.Version = 9
	if corr := decodeResponse(t, readResponse(t, conns[0]), &md, true); corr != 0 {
		t.Fatalf("correlation id %d", corr)
	}
	roundTripMetadata(t, conns[0], 100)
	// Free descriptors: the last connection, waiting in the backlog, is
	// accepted and answered.
	for _, c := range conns[:n/2] {
		c.Close()
	}
	if corr := decodeResponse(t, readResponse(t, conns[n-1]), &md, true); corr != n-1 {
		t.Fatalf("correlation id %d", corr)
	}
	logs.waitFor(t, "accepting again")
}

// emfileChild serves on a loopback port with 40 descriptors at most,
// prints the address, and exits when stdin closes.
func emfileChild() {
	lim := syscall.Rlimit{Cur: 40, Max: 40}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(1)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	h := &apiHandler{}
	h.host, h.port = "127.0.0.1", int32(l.Addr().(*net.TCPAddr).Port)
	s := NewServer(Config{MaxConnections: -1, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}, h)
	go s.Serve(l)
	fmt.Println(l.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	os.Exit(0)
}

// cpuTime is the user+system CPU time of process pid.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// Fields after the command name (which may hold spaces): utime is the
	// 14th field, stime the 15th, in clock ticks (100 per second).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// The default max.connections is half the open-file limit, within
// [64, 65536].
func TestDefaultMaxConnections(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	want := int(max(64, min(rl.Cur/2, 65536)))
	if got := DefaultMaxConnections(); got != want {
		t.Fatalf("DefaultMaxConnections() = %d with RLIMIT_NOFILE %d, want %d", got, rl.Cur, want)
	}
}
