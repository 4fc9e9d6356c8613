package daemontest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { Main(m) }

// produceOne writes one record to topic (auto-created) and returns its offset.
func produceOne(t *testing.T, addr, topic, value string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).First()
	if err != nil {
		t.Fatalf("produce to %s: %v", addr, err)
	}
	return r.Offset
}

func TestStartStopRestartKill(t *testing.T) {
	bin := Build(t)
	p := Start(t, bin, "--log-level", "debug")
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q", p.Addr())
	}
	if off := produceOne(t, p.Addr(), "harness", "a"); off != 0 {
		t.Errorf("first offset = %d", off)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v\n%s", err, p.Log())
	}
	if p.Running() {
		t.Fatal("running after Stop")
	}
	if !strings.Contains(p.Log(), "vltavad ready: listening on "+p.Addr()) {
		t.Errorf("log lacks the ready line:\n%s", p.Log())
	}

	p.Restart(t)
	if off := produceOne(t, p.Addr(), "harness", "b"); off != 1 {
		t.Errorf("offset after restart = %d, want 1 (data kept in %s)", off, p.DataDir())
	}
	p.Kill9()
	if p.Running() {
		t.Fatal("running after Kill9")
	}
	p.Restart(t)
	if off := produceOne(t, p.Addr(), "harness", "c"); off != 2 {
		t.Errorf("offset after kill -9 and restart = %d, want 2", off)
	}
}

func TestStartWithGivenDataDir(t *testing.T) {
	bin := Build(t)
	dir := filepath.Join(t.TempDir(), "mine")
	p := Start(t, bin, "--data-dir", dir)
	if p.DataDir() != dir {
		t.Errorf("DataDir() = %q, want %q", p.DataDir(), dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("data dir not created: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}
