package acceptance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
	"github.com/vltava/vltava/daemon/daemontest"
)

// TestRestartFigures measures a broker's restart with many partitions of
// many segments: time from exec to a served request after a clean
// shutdown, and after kill -9 with different amounts of unflushed data,
// with its descriptors and RSS. A figure, not a pass/fail: run it with
//
//	VLTAVA_SCALE_BENCH=10000x10 go test ./daemon/acceptance -run TestRestartFigures -v -timeout 60m
//
// (partitions x segments per partition; VLTAVA_SCALE_UNFLUSHED lists the
// MiB written between the clean start and the kill -9, default "0,64,256";
// VLTAVA_SCALE_RUNS repeats the restart after a clean shutdown).
// The topics are created through the broker (one CreateTopics), which is
// then stopped; the segments are written straight through core/log, which
// is much faster than producing them, and the broker is started again on
// the result.
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
	unflushed := []int{0, 64, 256}
	if v := os.Getenv("VLTAVA_SCALE_UNFLUSHED"); v != "" {
		unflushed = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("VLTAVA_SCALE_UNFLUSHED=%q: %v", v, err)
			}
			unflushed = append(unflushed, n)
		}
	}
	topics := max(1, min(100, parts/100))
	perTopic := parts / topics
	daemontest.StopTimeout = 10 * time.Minute
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("scale-%03d", i))
	}
	// VLTAVA_SCALE_DIR keeps the data set there (and reuses one already
	// there: only the restarts run); VLTAVA_SCALE_CPUPROFILE=FILE profiles
	// the restarts' broker.
	dataDir := os.Getenv("VLTAVA_SCALE_DIR")
	built := false
	if dataDir == "" {
		dataDir = t.TempDir()
	} else if _, err := os.Stat(filepath.Join(dataDir, "meta.properties")); err == nil {
		built = true
	}
	args := []string{"--data-dir", dataDir, "--override", "log.retention.ms=-1"}
	if prof := os.Getenv("VLTAVA_SCALE_CPUPROFILE"); prof != "" && built {
		args = append(args, "--cpuprofile", prof)
	}
	if !built {
		d := daemontest.Start(t, daemontest.Build(t), args...)
		adm := newAdmin(t, d.Addr())
		adm.SetTimeoutMillis(int32((10 * time.Minute).Milliseconds()))
		ctx := testCtx(t, 50*time.Minute)
		waitCreates(ctx, t, adm)
		start := time.Now()
		resps, err := adm.CreateTopics(ctx, int32(perTopic), 1, nil, names...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resps.Sorted() {
			if r.Err != nil {
				t.Errorf("create %s: %v: %s", r.Topic, r.Err, r.ErrMessage)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("created %d partitions (%d topics) in one CreateTopics in %v", topics*perTopic, topics, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		if err := d.Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("clean shutdown of the new partitions took %v", time.Since(start).Round(time.Millisecond))
		start = time.Now()
		writeSegments(t, dataDir, names, perTopic, segs)
		t.Logf("wrote %d segments per partition through core/log in %v", segs, time.Since(start).Round(time.Millisecond))
	}
	d := daemontest.Start(t, daemontest.Build(t), args...)
	if err := d.Stop(); err != nil { // a first start: the page cache holds what a restart reads
		t.Fatal(err)
	}

	restart := func(how string) {
		start := time.Now()
		d.Launch(t)
		readyAt := waitServes(t, d.Addr(), names[len(names)-1], int32(perTopic-1))
		took := readyAt.Sub(start)
		time.Sleep(2 * time.Second) // idle
		fds, rss := procFigures(t, d.Pid())
		t.Logf("%s: %d partitions x %d segments: serving after %v; idle: %d descriptors (%.2f per partition), RSS %.0f MiB; load %s",
			how, topics*perTopic, segs, took.Round(time.Millisecond), fds, float64(fds)/float64(topics*perTopic), float64(rss)/(1<<20), loadAvg())
		run := d.Log()
		run = run[strings.LastIndex(run, "\n--- ")+1:] // this start's lines
		for _, line := range strings.Split(run, "\n") {
			if strings.Contains(line, "recovered the logs") {
				t.Logf("  %s", line)
			}
		}
	}
	runs, _ := strconv.Atoi(os.Getenv("VLTAVA_SCALE_RUNS"))
	for i := range max(1, runs) {
		if i > 0 {
			if err := d.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		restart("clean shutdown")
	}
	for i, mib := range unflushed {
		if mib > 0 {
			// A partition of its own each time: what recovery scans is
			// then these bytes (and the one record of the segment).
			produceUnflushed(t, d.Addr(), names[0], int32(i), mib)
		}
		d.Kill9()
		restart(fmt.Sprintf("kill -9 with %d MiB unflushed", mib))
	}
	if err := d.Stop(); err != nil {
		t.Error(err)
	}
}

// writeSegments appends segs one-record batches (leader epoch 0, the
// epoch CreateTopics gave) to every partition of names, rolling after
// each, through core/log on the stopped broker's directories.
func writeSegments(t *testing.T, dataDir string, names []string, perTopic, segs int) {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	type job struct {
		name string
		p    int
	}
	jobs := make(chan job)
	var (
		wg   sync.WaitGroup
		errs atomic.Pointer[error]
	)
	for range 2 * runtime.NumCPU() {
		wg.Go(func() {
			for j := range jobs {
				if err := writePartition(filepath.Join(dataDir, fmt.Sprintf("%s-%d", j.name, j.p)), cfg, j.name, j.p, segs); err != nil {
					errs.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for _, name := range names {
		for p := range perTopic {
			jobs <- job{name, p}
		}
	}
	close(jobs)
	wg.Wait()
	if err := errs.Load(); err != nil {
		t.Fatal(*err)
	}
}

func writePartition(dir string, cfg log.Config, name string, p, segs int) error {
	if _, err := os.Stat(dir); err != nil {
		return err // the broker made every directory
	}
	l, err := log.Open(dir, cfg)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	for s := range segs {
		b := recordtest.Build(recordtest.Options{Codec: record.CodecNone}, recordtest.Rec{
			Value:     []byte(fmt.Sprintf("segment %d of %s-%d, padded %s", s, name, p, strings.Repeat("x", 40))),
			Timestamp: now,
		})
		if _, err := l.Append(b, log.AppendOptions{LeaderEpoch: 0}); err != nil {
			l.Close()
			return err
		}
		if s < segs-1 {
			if err := l.Roll(); err != nil {
				l.Close()
				return err
			}
		}
	}
	return l.Close()
}

// produceUnflushed writes mib MiB of 1 KiB records (acks=1) to topic's
// partition p: nothing the broker fsyncs before the kill (flush.ms and
// the recovery-point checkpoint interval are far longer).
func produceUnflushed(t *testing.T, addr, topic string, p int32, mib int) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testCtx(t, 10*time.Minute)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range mib * 1024 {
		val := make([]byte, 1024)
		rand.Read(val) // incompressible, though nothing compresses here
		r := &kgo.Record{Topic: topic, Partition: p, Value: val}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	cl.Close()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
}

// waitCreates returns once the broker creates topics (it answers
// REQUEST_TIMED_OUT until it has registered with its metadata store): it
// creates a one-partition topic "ready-probe".
func waitCreates(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	for {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, "ready-probe")
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return
		}
		if !errors.Is(err, kerr.RequestTimedOut) || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
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
