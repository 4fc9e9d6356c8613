package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/log"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Fault 6 of issue 9, the daemon's part: when an fsync of its (only) log
// directory fails, vltavad refuses the write, stops, and exits non-zero
// saying why, as Kafka halts a broker whose log directories are offline.
func TestDaemonExitsWhenLogDirFails(t *testing.T) {
	dir := t.TempDir()
	outR, outW := io.Pipe()
	var stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--in-process-plugins", "--node-id", "1"}, outW, &stderr)
		outW.Close()
	}()
	t.Cleanup(func() {
		select {
		case <-code:
			return
		case <-time.After(time.Second):
		}
		// Still serving (the test failed early): stop it as a signal would.
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {
		case <-code:
		case <-time.After(30 * time.Second):
			t.Error("vltavad did not exit")
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "vltavad ready: listening on "); ok {
				addr <- strings.TrimSuffix(strings.Fields(a)[0], ",")
			}
		}
	}()
	var seed string
	select {
	case seed = <-addr:
	case c := <-code:
		code <- c
		t.Fatalf("vltavad exited with %d before it was ready:\n%s", c, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("vltavad not ready:\n%s", stderr.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"flush.messages": kadm.StringPtr("1")}, "durable"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "durable", Value: []byte("acked")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected EIO")
	defer log.InjectSyncFailure(dir, injected)()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "durable", Value: []byte("refused")}).FirstErr()
	if err == nil {
		t.Fatal("a write whose fsync failed was acknowledged")
	}
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Logf("produce error %v (the broker may already be gone)", err)
	}
	select {
	case c := <-code:
		code <- c
		if c == 0 {
			t.Fatalf("vltavad exited 0 after its log directory failed:\n%s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("vltavad still running after its log directory failed:\n%s", stderr.String())
	}
	if out := stderr.String(); !strings.Contains(out, "log directory offline") || !strings.Contains(out, "injected EIO") {
		t.Fatalf("stderr does not say why vltavad stopped:\n%s", out)
	}
}
