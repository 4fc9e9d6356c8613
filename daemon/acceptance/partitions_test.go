package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestManyPartitionsUnderLowDescriptorLimit is issue 13's acceptance
// test: under `ulimit -n 1024`, 5,000 partitions are created, every one
// accepts a produce and serves a fetch, the broker's descriptors stay
// under the limit and it keeps running. Descriptors are a budget: idle
// segment files, active ones included, close and reopen on use.
func TestManyPartitionsUnderLowDescriptorLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 5,000 partitions; skipped with -short")
	}
	const topics, perTopic, limit = 50, 100, 1024
	bin := daemontest.Build(t)
	addr, dir := daemontest.FreePort(t), t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit), bin,
		"--listen", addr, "--data-dir", dir, "--metrics-listen=")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("vltavad output:\n%s", tail(out.String(), 40))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(time.Minute), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitUntil(t, 30*time.Second, "the broker to answer", func() error { _, err := adm.ListBrokers(ctx); return err })

	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("many-%02d", i))
	}
	// A loaded machine may make the client retry the request after its
	// timeout: topics its first attempt created then answer
	// TOPIC_ALREADY_EXISTS, which is as good.
	resps, err := adm.CreateTopics(ctx, perTopic, 1, nil, names...)
	if err != nil {
		t.Fatalf("creating %d partitions: %v", topics*perTopic, err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			t.Fatalf("creating %s: %v", r.Topic, r.Err)
		}
	}
	maxFDs := 0
	check := func(stage string) {
		n := countFDs(t, cmd.Process.Pid)
		maxFDs = max(maxFDs, n)
		if n >= limit {
			t.Fatalf("%s: vltavad holds %d descriptors, limit %d", stage, n, limit)
		}
		select {
		case <-exited:
			t.Fatalf("%s: vltavad exited", stage)
		default:
		}
	}
	check("after create")

	// One record to every partition.
	var rs []*kgo.Record
	for _, name := range names {
		for p := range int32(perTopic) {
			rs = append(rs, &kgo.Record{Topic: name, Partition: p, Value: []byte(fmt.Sprintf("%s/%d", name, p))})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing to every partition: %v", err)
	}
	check("after produce")

	// Fetch every partition back.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(names...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < topics*perTopic && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil && ctx.Err() == nil {
			t.Fatalf("fetching: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("%s/%d", r.Topic, r.Partition); string(r.Value) != want {
				t.Errorf("%s-%d holds %q", r.Topic, r.Partition, r.Value)
			}
			seen[string(r.Value)] = true
		})
		check("while fetching")
	}
	if len(seen) != topics*perTopic {
		t.Fatalf("fetched %d of %d partitions' records", len(seen), topics*perTopic)
	}
	t.Logf("5,000 partitions under ulimit -n %d: at most %d descriptors seen", limit, maxFDs)
}

// countFDs counts a process's open descriptors.
func countFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(filepath.Join("/proc", fmt.Sprint(pid), "fd"))
	if err != nil {
		if strings.Contains(err.Error(), "no such") {
			return 0
		}
		t.Fatalf("reading vltavad's descriptors: %v", err)
	}
	return len(ents)
}
