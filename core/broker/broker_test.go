package broker

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vltava/vltava/core/config"
)

// testBroker starts a broker on a loopback port chosen at run time with its
// data in a temporary directory; it is closed when the test ends.
func testBroker(t *testing.T, edit ...func(*config.Broker)) *Broker {
	t.Helper()
	cfg := config.DefaultBroker()
	cfg.Listeners = "127.0.0.1:0"
	cfg.LogDirs = t.TempDir()
	for _, e := range edit {
		e(&cfg)
	}
	return startBroker(t, cfg)
}

func startBroker(t *testing.T, cfg config.Broker) *Broker {
	t.Helper()
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	b, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return b
}

// testClient is a franz-go client of b, closed when the test ends.
func testClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr()), kgo.RetryTimeout(10 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
