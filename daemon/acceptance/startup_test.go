package acceptance

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vltava/vltava/daemon/daemontest"
)

// runToExit runs vltavad with args and returns its output once it exits,
// failing the test if it is still running after a minute.
func runToExit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, daemontest.Build(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("vltavad %q did not exit: %s", args, out)
	}
	return string(out), err
}

// TestSecondBrokerOnSameDataDir: the second broker on a data directory
// exits at once naming the first one's PID, not with a bbolt timeout.
func TestSecondBrokerOnSameDataDir(t *testing.T) {
	first := daemontest.Start(t, daemontest.Build(t))
	out, err := runToExit(t, "--listen", daemontest.FreePort(t), "--data-dir", first.DataDir())
	if err == nil {
		t.Fatalf("second broker on %s started:\n%s", first.DataDir(), out)
	}
	want := "data directory " + first.DataDir() + " in use by PID " + strconv.Itoa(first.Pid())
	if !strings.Contains(out, want) {
		t.Errorf("second broker said:\n%s\nwant it to say %q", out, want)
	}
	if !first.Running() {
		t.Error("the first broker stopped")
	}
}

// TestPortInUseLeavesNoDataDir: a broker that cannot listen writes nothing
// into a data directory that did not exist.
func TestPortInUseLeavesNoDataDir(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "new", "data")
	out, err := runToExit(t, "--listen", ln.Addr().String(), "--data-dir", dir)
	if err == nil {
		t.Fatalf("broker on a port in use started:\n%s", out)
	}
	if !strings.Contains(out, ln.Addr().String()) || !strings.Contains(out, "address already in use") {
		t.Errorf("broker said:\n%s", out)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("data directory left behind (%v): %v", err, entries)
	}
}

// TestStockServerPropertiesServes: a broker started from a stock Kafka
// server.properties (with the port moved by --listen) serves clients at
// the advertised address, which followed --listen, and says it ignored
// Kafka's other keys in one line.
func TestStockServerPropertiesServes(t *testing.T) {
	dir := t.TempDir()
	p := daemontest.Start(t, daemontest.Build(t), "--config", filepath.Join("..", "testdata", "kafka-server.properties"),
		"--data-dir", dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(p.Addr())
	if len(md.Brokers) != 1 || md.Brokers[0].Host != "localhost" || strconv.Itoa(int(md.Brokers[0].Port)) != port {
		t.Errorf("brokers advertised %+v, want localhost:%s", md.Brokers, port)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	log := p.Log()
	if n := strings.Count(log, "no effect in Vltava"); n != 1 || !strings.Contains(log, "num.network.threads") {
		t.Errorf("want one warning naming num.network.threads, got %d:\n%s", n, log)
	}
	if !strings.Contains(log, "advertised as PLAINTEXT://localhost:"+port) {
		t.Errorf("the ready line does not show the advertised address:\n%s", log)
	}
}
