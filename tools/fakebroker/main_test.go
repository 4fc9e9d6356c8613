package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// start runs the fake broker with args and returns its address; the
// broker is stopped (and its exit code checked) when the test ends.
func start(t *testing.T, args ...string) string {
	t.Helper()
	pr, pw := io.Pipe()
	stop := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() {
		code <- run(append([]string{"--listen", "127.0.0.1:0"}, args...), pw, io.Discard, stop)
		pw.Close()
	}()
	t.Cleanup(func() {
		stop <- syscall.SIGTERM
		go io.Copy(io.Discard, pr)
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("exit code %d, want 0", c)
			}
		case <-time.After(10 * time.Second):
			t.Error("fakebroker did not stop")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading ready line: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "fakebroker ready: listening on ")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("ready line %q", line)
	}
	return addr
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestSeededTopicRoundTrip(t *testing.T) {
	addr := start(t, "--partitions", "3", "--topic", "bench", "--data-dir", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := client(t, addr, kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	td, err := kadm.NewClient(cl).ListTopics(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["bench"].Partitions); n != 3 {
		t.Fatalf("bench has %d partitions, want 3", n)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("consumed %v, want one record \"v\"", recs)
	}
}

func TestBlackholeAcksAndDrops(t *testing.T) {
	addr := start(t, "--blackhole", "--partitions", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := client(t, addr, kgo.AllowAutoTopicCreation())
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "hole", Value: []byte("v")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, "hole")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["hole"].Partitions); n != 2 {
		t.Fatalf("auto-created topic has %d partitions, want 2", n)
	}
	p := res[0].Record.Partition
	offs, err := kadm.NewClient(cl).ListStartOffsets(ctx, "hole")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "hole")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := offs.Lookup("hole", p)
	e, _ := ends.Lookup("hole", p)
	if e.Offset != 1 {
		t.Errorf("end offset %d, want 1 (offsets still advance)", e.Offset)
	}
	// Consuming the acknowledged record must not return it: it was dropped.
	cons := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"hole": {p: kgo.NewOffset().At(s.Offset)}}))
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer pcancel()
	if n := cons.PollFetches(pctx).NumRecords(); n != 0 {
		t.Errorf("blackhole returned %d records, want 0", n)
	}
}

func TestSyntheticFetchServesCannedRecords(t *testing.T) {
	addr := start(t, "--synthetic", "100", "--topic", "syn", "--partitions", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := client(t, addr, kgo.ConsumeTopics("syn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) == 0 {
		t.Fatal("no records from a synthetic topic nobody produced to")
	}
	if len(recs[0].Value) != 100 {
		t.Errorf("record value is %d bytes, want 100", len(recs[0].Value))
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--partitions", "0"},
		{"--blackhole", "--data-dir", "x"},
		{"--synthetic", "-1"},
		{"extra"},
		{"--nope"},
	} {
		if code := run(args, io.Discard, io.Discard, make(chan os.Signal)); code != 2 {
			t.Errorf("%v: exit code %d, want 2", args, code)
		}
	}
}
