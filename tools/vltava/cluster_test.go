package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vltava/vltava/daemon/daemontest"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until out matches re and returns the match.
func waitFor(t *testing.T, out *syncBuffer, re string, done <-chan error) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case err := <-done:
			t.Fatalf("cluster up ended (%v) before printing %q:\n%s", err, re, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("cluster up did not print %q:\n%s", re, out.String())
	return nil
}

// TestClusterUp: a node that dies is reported and the others keep
// running; kill N, restart N and stop work from stdin and from another
// command; topic describe right after topic create shows every partition's
// offsets, whichever broker leads it.
func TestClusterUp(t *testing.T) {
	bin := daemontest.Build(t)
	dir := t.TempDir()
	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- run(ctx, []string{"cluster", "up", "-n", "2", "--controllers", "1", "--vltavad", bin, "--dir", dir,
			"-c", "replica.lag.time.max.ms=2000", "-c", "broker.session.timeout.ms=6000"},
			stdin, &out, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(time.Minute):
			t.Error("cluster up did not stop")
		}
	})
	boot := waitFor(t, &out, `bootstrap: (\S+)\n`, done)[1]
	if !strings.Contains(out.String(), "cluster of 2 brokers and 1 controller (") {
		t.Errorf("header:\n%s", out.String())
	}

	// describe right after create: every partition has offsets.
	cli(t, boot, "", "topic", "create", "spread", "-p", "4", "-r", "1")
	desc := cli(t, boot, "", "topic", "describe", "spread")
	if strings.Contains(desc, "-1") || strings.Count(desc, "\n") != 7 {
		t.Errorf("describe right after create:\n%s", desc)
	}

	// kill 2 from the terminal; the cluster stays up, and topic list
	// counts the partitions that lost a replica.
	cli(t, boot, "", "topic", "create", "rep", "-p", "2", "-r", "2")
	if _, err := io.WriteString(stdinW, "kill 2\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, `killed broker 2 \(kill -9\)`, done)
	b1 := strings.Split(boot, ",")[0]
	underRe := regexp.MustCompile(`(?m)^rep +2 +2 +2 +`)
	deadline := time.Now().Add(90 * time.Second)
	for list := ""; !underRe.MatchString(list); list = cli(t, b1, "", "topic", "list") {
		if time.Now().After(deadline) {
			t.Fatalf("topic list does not show rep's 2 under-replicated partitions:\n%s", list)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// topic describe --under-replicated names them and the missing replica.
	ur := cli(t, b1, "", "topic", "describe", "--under-replicated")
	if got := regexp.MustCompile(`(?m)^rep +[01] +\d+ +\S+ +\S+ +2 *$`).FindAllString(ur, -1); len(got) != 2 {
		t.Errorf("topic describe --under-replicated does not list rep's two partitions missing broker 2:\n%s", ur)
	}

	// broker 1 crashes (kill -9 from outside): reported, the others run.
	pidText, err := os.ReadFile(filepath.Join(dir, "broker-1", ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatalf("lock file holds %q", pidText)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, `broker 1 exited \(signal: killed\); see .*broker-1.log. The others keep running`, done)

	// restart from another terminal, and from this one.
	if got := cli(t, boot, "", "cluster", "restart", "1", "--dir", dir); !strings.HasPrefix(got, "restarted broker 1 (pid ") {
		t.Errorf("cluster restart 1 printed %q", got)
	}
	io.WriteString(stdinW, "restart 2\n")
	waitFor(t, &out, `restarted broker 2`, done)
	if _, _, err := cliErr(t, boot, "", "cluster", "kill", "9", "--dir", dir); err == nil || !strings.Contains(err.Error(), "no node") {
		t.Errorf("cluster kill 9: %v", err)
	}
	// Both serve again (once they have started).
	for _, addr := range strings.Split(boot, ",") {
		deadline := time.Now().Add(90 * time.Second)
		for {
			_, _, err := cliErr(t, addr, "", "topic", "list", "--timeout", "5s")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not serve after the restart: %v", addr, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	if got := cli(t, boot, "", "cluster", "stop", "--dir", dir); !strings.Contains(got, "stopping") {
		t.Errorf("cluster stop printed %q", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cluster up: %v", err)
		}
		if strings.Contains(out.String(), "did not stop") {
			// Possible on a loaded machine (controlled shutdown is
			// bounded at 20s); worth a look, not a failure.
			t.Logf("a node needed SIGKILL:\n%s", out.String())
			for _, l := range []string{"broker-1.log", "broker-2.log", "controller-3.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, l))
				ls := strings.Split(string(b), "\n")
				t.Logf("%s, the end:\n%s", l, strings.Join(ls[max(0, len(ls)-40):], "\n"))
			}
		}
	case <-time.After(time.Minute):
		t.Fatal("cluster up still running after stop")
	}
}

// TestClusterUpOutsideTheRepository: without a vltavad to run, the error
// says what to do, and does not blame the conformance suite.
func TestClusterUpOutsideTheRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PATH", t.TempDir())
	_, _, err := cliErr(t, "127.0.0.1:1", "", "cluster", "up", "-n", "1")
	if err == nil || strings.Contains(err.Error(), "conformance") || !strings.Contains(err.Error(), "--vltavad") {
		t.Errorf("err = %v", err)
	}
}

func TestPlural(t *testing.T) {
	if plural(1, "controller") != "1 controller" || plural(0, "controller") != "0 controllers" {
		t.Error(plural(1, "controller"), plural(0, "controller"))
	}
}

// TestDescribeRightAfterCreate: in a cluster, topic describe right after
// topic create shows every partition's offsets, including those led by
// brokers other than the one answering, and never "does not exist".
func TestDescribeRightAfterCreate(t *testing.T) {
	c := daemontest.StartCluster(t, daemontest.Build(t), 3)
	boot := strings.Join(c.Addrs(), ",")
	for i := range 3 {
		name := "fresh" + strconv.Itoa(i)
		cli(t, boot, "", "topic", "create", name, "-p", "6", "-r", "1")
		// Ask a broker other than the first, which may have created it.
		desc := cli(t, c.AllAddrs()[(i+1)%3], "", "topic", "describe", name)
		rows := 0
		for _, l := range lines(desc) {
			if f := strings.Fields(l); len(f) == 6 && f[0] != "PARTITION" {
				rows++
				if f[4] != "0" || f[5] != "0" {
					t.Errorf("%s: partition row %q, want offsets 0 0", name, l)
				}
			}
		}
		if rows != 6 {
			t.Errorf("%s: %d partition rows, want 6:\n%s", name, rows, desc)
		}
	}

	// partition reassign moves a replica; describe shows it once done.
	cli(t, boot, "", "topic", "create", "moving", "-p", "1", "-r", "1")
	var from int
	for _, l := range lines(cli(t, boot, "", "topic", "describe", "moving")) {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "0" {
			from, _ = strconv.Atoi(f[2])
		}
	}
	to := from%3 + 1
	// --wait returns once the move is done (or fails at --timeout).
	{
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		var o, e bytes.Buffer
		err := run(ctx, []string{"-b", boot, "--timeout", "90s", "partition", "reassign", "moving", "0", "--replicas", strconv.Itoa(to), "--wait"}, strings.NewReader(""), &o, &e)
		cancel()
		if got := o.String(); err != nil || !strings.Contains(got, "reassigning moving/0 to replicas "+strconv.Itoa(to)) ||
			!strings.Contains(got, "moved moving/0: replicas "+strconv.Itoa(to)+", all in sync") {
			t.Errorf("reassign --wait: %v; printed %q, stderr %q", err, got, e.String())
		}
	}
	want := regexp.MustCompile(`(?m)^0 +` + strconv.Itoa(to) + ` +` + strconv.Itoa(to) + ` +` + strconv.Itoa(to) + ` `)
	// Done means done: describe shows the move at once (allowing another
	// broker's metadata a few seconds to catch up).
	deadline := time.Now().Add(5 * time.Second)
	for desc := ""; !want.MatchString(desc); desc = cli(t, boot, "", "topic", "describe", "moving") {
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 not shown moved from broker %d to %d 5s after reassign --wait returned:\n%s", from, to, desc)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLocateVltavadBuildsOnce: inside the repository, cluster up builds
// vltavad into one file of the user cache dir, the same every run, not a
// copy per run.
func TestLocateVltavadBuildsOnce(t *testing.T) {
	// Keep go's own caches where they are: only the user cache dir moves.
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Skipf("go env %s: %v", k, err)
		}
		t.Setenv(k, strings.TrimSpace(string(out)))
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	first, err := locateVltavad()
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := exec.LookPath("vltavad"); p == first {
		t.Skip("vltavad is on PATH; nothing is built")
	}
	if !strings.HasPrefix(first, cache) {
		t.Errorf("vltavad built at %s, want it in the user cache dir %s", first, cache)
	}
	second, err := locateVltavad()
	if err != nil || second != first {
		t.Errorf("second run: %s, %v; want the same %s", second, err, first)
	}
	if out, err := exec.Command(first, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "vltavad ") {
		t.Errorf("%s --version: %q, %v", first, out, err)
	}
}

// TestPlanClusterPortsOutsideEphemeralRange: without --port, every node's
// Kafka and quorum port is distinct and outside the kernel's ephemeral
// range (testport), so no other bind or outgoing connection takes one
// between planning and the node's bind, as a released port-0 bind could.
func TestPlanClusterPortsOutsideEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range: ", err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		t.Skipf("ip_local_port_range %q: %v", b, err)
	}
	nodes, err := planCluster(3, 2, "127.0.0.1", 0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, nd := range nodes {
		for _, addr := range []string{nd.addr, nd.quorum} {
			if addr == "" {
				continue // a controller has no Kafka listener
			}
			_, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			if seen[port] || p >= lo && p <= hi {
				t.Errorf("node %d: %s twice, or in the ephemeral range [%d, %d]", nd.id, addr, lo, hi)
			}
			seen[port] = true
		}
	}
}
