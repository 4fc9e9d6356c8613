package acceptance

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestartFigures measures a broker's restart with many partitions of
// many segments: time from exec to a served request after a clean
// shutdown, and after kill -9, with its descriptors and RSS. A figure, not
// a pass/fail: run it with
//
//	VLTAVA_SCALE_BENCH=10000x10 go test ./daemon/acceptance -run TestRestartFigures -v -timeout 30m
//
// (partitions x segments per partition).
func TestRestartFigures(t *testing.T) {
	spec := os.Getenv("VLTAVA_SCALE_BENCH")
	if spec == "" {
		t.Skip("a measurement: set VLTAVA_SCALE_BENCH=PARTITIONSxSEGMENTS (e.g. 10000x10)")
	}
	ps, ss, _ := strings.Cut(spec, "x")
	parts, _ := strconv.Atoi(ps)
	segs, _ := strconv.Atoi(ss)
	if parts <= 0 || segs <= 0 {
		t.Fatalf("VLTAVA_SCALE_BENCH=%q: want PARTITIONSxSEGMENTS", spec)
	}
	topics := max(1, parts/100)
	perTopic := parts / topics
	d := startDaemon(t, map[string]string{"log.segment.bytes": "100", "log.retention.ms": "-1"})
	adm := newAdmin(t, d.Addr())
	ctx := testCtx(t, 25*time.Minute)
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("scale-%03d", i))
	}
	start := time.Now()
	if _, err := adm.CreateTopics(ctx, int32(perTopic), 1, nil, names...); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d partitions in %v", topics*perTopic, time.Since(start).Round(time.Millisecond))
	cl := newClient(t, d.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(100000), kgo.ProducerBatchMaxBytes(1<<20))
	start = time.Now()
	for s := range segs {
		var rs []*kgo.Record
		for _, name := range names {
			for p := range int32(perTopic) {
				rs = append(rs, &kgo.Record{Topic: name, Partition: p, Value: []byte(fmt.Sprintf("segment %d of %s-%d, padded to roll %s", s, name, p, strings.Repeat("x", 40)))})
			}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d segments per partition in %v", segs, time.Since(start).Round(time.Millisecond))

	restart := func(how string, stop func()) {
		stop()
		start := time.Now()
		d.Launch(t)
		readyAt := waitServes(t, d.Addr(), names[len(names)-1], int32(perTopic-1))
		took := readyAt.Sub(start)
		time.Sleep(2 * time.Second) // idle
		fds, rss := procFigures(t, d.Pid())
		t.Logf("%s: %d partitions x %d segments: serving after %v; idle: %d descriptors (%.2f per partition), RSS %.0f MiB",
			how, topics*perTopic, segs, took.Round(time.Millisecond), fds, float64(fds)/float64(topics*perTopic), float64(rss)/(1<<20))
	}
	restart("clean shutdown", func() {
		if err := d.Stop(); err != nil {
			t.Fatal(err)
		}
	})
	restart("kill -9", d.Kill9)
}

// waitServes returns when a fetch of topic/partition's first record
// succeeds: it waits for the listener, then fetches with short attempts,
// so the figure is not rounded up to a client timeout.
func waitServes(t *testing.T, addr, topic string, p int32) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(50*time.Millisecond))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			cl.Close()
			if fs.NumRecords() > 0 {
				return time.Now()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the broker never served after the restart")
	return time.Time{}
}

// procFigures reads a process's descriptor count and RSS.
func procFigures(t *testing.T, pid int) (fds int, rss int64) {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return len(ents), rss
}
