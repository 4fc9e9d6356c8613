package examples_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/vltava/vltava/daemon/daemontest"
)

// exampleConfig writes a broker config that loads both examples: the
// sticky assignor next to the built-ins, and tokenauth serving a
// SASL_PLAINTEXT listener on addr.
func exampleConfig(t *testing.T, addr string) string {
	t.Helper()
	cfg := fmt.Sprintf(`listeners: SASL_PLAINTEXT://%[1]s
log.dirs: %[2]s
group.consumer.assignors: uniform,range,%[3]s
sasl.enabled.mechanisms: PLAIN
sasl.authenticators: %[4]s
sasl.authenticator.config:
  %[4]s:
    tokens:
      alice: s3cret
      bob: t0ken
`, addr, t.TempDir(), bin("stickyassignor"), bin("tokenauth"))
	path := filepath.Join(t.TempDir(), "vltava.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDaemonListsExamples: `vltavad plugins --config` starts every plugin
// the config names and lists them.
func TestDaemonListsExamples(t *testing.T) {
	conf := exampleConfig(t, daemontest.FreePort(t))
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin("daemon"), "plugins", "--config", conf)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vltavad plugins: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	for _, want := range [][]string{
		{"assignor", bin("stickyassignor")},
		{"authenticator", bin("tokenauth")},
		{"assignor", "uniform"},
		{"metastore", "local"},
	} {
		found := false
		for _, line := range strings.Split(stdout.String(), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == want[0] && f[1] == want[1] {
				found = true
			}
		}
		if !found {
			t.Errorf("vltavad plugins lists no %s %s; output:\n%s", want[0], want[1], &stdout)
		}
	}
}

// TestDaemonServesTokenAuth runs vltavad with the examples loaded from the
// config file and authenticates real clients through the tokenauth
// plugin process.
func TestDaemonServesTokenAuth(t *testing.T) {
	addr := daemontest.FreePort(t)
	startDaemon(t, addr, "--config", exampleConfig(t, addr))
	checkTokenClients(t, addr)
}

// startDaemon runs the vltavad binary with args until the test ends and
// waits until addr accepts connections. Its output is logged if the test
// fails.
func startDaemon(t *testing.T, addr string, args ...string) {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(bin("daemon"), args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a kill reaches the plugins too
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("vltavad output:\n%s", out)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("vltavad exited before serving")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("vltavad did not accept connections on %s", addr)
		}
	}
}

// syncBuffer collects a process's output from its copying goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDaemonGroupUsesStickyPlugin: a KIP-848 member that asks for the
// "sticky" server assignor gets its assignment from the stickyassignor
// plugin process (a name no plugin serves is refused), on a broker that
// also authenticates through tokenauth.
func TestDaemonGroupUsesStickyPlugin(t *testing.T) {
	addr := daemontest.FreePort(t)
	startDaemon(t, addr, "--config", exampleConfig(t, addr))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(10*time.Second),
		kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	heartbeat := func(member, assignor string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "g", member, 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"orders"}
		req.ServerAssignor = kmsg.StringPtr(assignor)
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		return resp
	}
	if resp := heartbeat("m-unknown", "no-such-assignor"); resp.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Fatalf("assignor no-such-assignor: error code %d, want UNSUPPORTED_ASSIGNOR", resp.ErrorCode)
	}
	resp := heartbeat("m1", "sticky")
	if resp.ErrorCode != 0 {
		t.Fatalf("assignor sticky: error %v (%v)", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	var got []int32
	if resp.Assignment != nil {
		for _, tp := range resp.Assignment.Topics {
			got = append(got, tp.Partitions...)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("the only member was assigned partitions %v, want [0 1 2 3]", got)
	}
}
