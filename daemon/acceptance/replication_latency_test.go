package acceptance

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestReplicationLatency prints the BENCHMARKS.md "Replicated latency"
// figures (issue 15, target 1): produce latency (Produce to its callback)
// and end-to-end latency (Produce to a consumer's PollFetches) at a fixed
// rate of 1 KiB records over 6 partitions, RF=3 acks=all and RF=1
// acks=all, interleaved. It runs only with VLTAVA_REPLICATION_BENCH=1 and
// asserts nothing about speed:
//
//	VLTAVA_REPLICATION_BENCH=1 go test ./daemon/acceptance -run TestReplicationLatency -v
//
// VLTAVA_BENCH_VLTAVAD=/path/to/vltavad measures that binary instead of
// building the tree (for before/after runs); VLTAVA_BENCH_MBPS (20),
// VLTAVA_BENCH_SECONDS (10 per run) and VLTAVA_BENCH_ROUNDS (3) size it.
// The brokers run at log level info with the cluster tests' defaults
// (replica.fetch.wait.max.ms=200).
func TestReplicationLatency(t *testing.T) {
	if os.Getenv("VLTAVA_REPLICATION_BENCH") == "" {
		t.Skip("set VLTAVA_REPLICATION_BENCH=1 to measure")
	}
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	envInt := func(k string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return def
	}
	mbps, secs, rounds := envInt("VLTAVA_BENCH_MBPS", 20), envInt("VLTAVA_BENCH_SECONDS", 10), envInt("VLTAVA_BENCH_ROUNDS", 3)
	bin := os.Getenv("VLTAVA_BENCH_VLTAVAD")
	if bin == "" {
		bin = daemontest.Build(t)
	}
	cfg := maps.Clone(clusterDefaults)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		fmt.Fprintf(&b, "%s: %q\n", k, cfg[k])
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := daemontest.StartClusterWith(t, bin, daemontest.ClusterOptions{Brokers: 3}, "--config", path, "--log-level", "info")
	const parts = 6
	createReplicated(t, c, "lat-rf3", parts, 3, map[string]string{"min.insync.replicas": "2"})
	createReplicated(t, c, "lat-rf1", parts, 1, map[string]string{"min.insync.replicas": "1"})

	type result struct {
		produce, e2e []time.Duration
		use          brokerUse // the brokers' use per GiB produced
	}
	results := map[string][]result{}
	for round := range rounds {
		for _, topic := range []string{"lat-rf3", "lat-rf1"} {
			use0 := brokersUse(t, c)
			r := measureLatency(t, c, topic, parts, mbps, time.Duration(secs)*time.Second)
			use := brokersUse(t, c).since(use0).per(float64(len(r.produce)) * latencyRecordSize / (1 << 30))
			results[topic] = append(results[topic], result{r.produce, r.e2e, use})
			t.Logf("round %d %s: brokers per GiB: %s | produce %s | end-to-end %s", round+1, topic, use, quantiles(r.produce), quantiles(r.e2e))
		}
	}
	for _, topic := range []string{"lat-rf3", "lat-rf1"} {
		var p50, p99, p999, e50, e99, e999 []time.Duration
		var uses []brokerUse
		for _, r := range results[topic] {
			p50, p99, p999 = append(p50, q(r.produce, 0.5)), append(p99, q(r.produce, 0.99)), append(p999, q(r.produce, 0.999))
			e50, e99, e999 = append(e50, q(r.e2e, 0.5)), append(e99, q(r.e2e, 0.99)), append(e999, q(r.e2e, 0.999))
			uses = append(uses, r.use)
		}
		t.Logf("median of %d: %s acks=all %d MB/s: brokers per GiB: %s | produce p50 %v p99 %v p99.9 %v | end-to-end p50 %v p99 %v p99.9 %v",
			rounds, topic, mbps, medianUse(uses), med(p50), med(p99), med(p999), med(e50), med(e99), med(e999))
	}
}

// latencyRecordSize is the value size measureLatency produces.
const latencyRecordSize = 1024

// brokerUse is what the cluster's vltavad processes used: CPU-seconds
// (utime + stime, /proc/PID/stat), read and write system calls (syscr +
// syscw of /proc/PID/io: read, pread, write, pwrite, sendfile and their
// vector forms) and context switches (voluntary and not, summed over the
// threads of /proc/PID/task; a thread that exited no longer counts).
// Counts of system calls and switches hardly depend on how busy the
// machine is, unlike latency and, less so, CPU time.
type brokerUse struct{ cpu, syscalls, switches float64 }

func (u brokerUse) since(v brokerUse) brokerUse {
	return brokerUse{u.cpu - v.cpu, u.syscalls - v.syscalls, u.switches - v.switches}
}

func (u brokerUse) per(d float64) brokerUse {
	return brokerUse{u.cpu / d, u.syscalls / d, u.switches / d}
}

func (u brokerUse) String() string {
	return fmt.Sprintf("CPU %.2f s, %.0fk read/write syscalls, %.0fk context switches", u.cpu, u.syscalls/1000, u.switches/1000)
}

// medianUse is the median of each figure on its own.
func medianUse(us []brokerUse) brokerUse {
	pick := func(f func(brokerUse) float64) float64 {
		var v []float64
		for _, u := range us {
			v = append(v, f(u))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return brokerUse{
		pick(func(u brokerUse) float64 { return u.cpu }),
		pick(func(u brokerUse) float64 { return u.syscalls }),
		pick(func(u brokerUse) float64 { return u.switches }),
	}
}

// brokersUse sums brokerUse over the cluster's brokers so far
// (prometheus/procfs, as the daemon's process metrics).
func brokersUse(t *testing.T, c *daemontest.Cluster) brokerUse {
	t.Helper()
	var u brokerUse
	for _, b := range c.Brokers() {
		p, err := procfs.NewProc(b.Pid())
		if err != nil {
			t.Fatalf("broker use: %v", err)
		}
		st, err := p.Stat()
		if err != nil {
			t.Fatalf("broker use: %v", err)
		}
		pio, err := p.IO()
		if err != nil {
			t.Fatalf("broker use: %v", err)
		}
		u.cpu += st.CPUTime()
		u.syscalls += float64(pio.SyscR + pio.SyscW)
		threads, err := procfs.AllThreads(b.Pid())
		if err != nil {
			t.Fatalf("broker use: %v", err)
		}
		for _, th := range threads {
			if ts, err := th.NewStatus(); err == nil { // a thread may exit meanwhile
				u.switches += float64(ts.VoluntaryCtxtSwitches + ts.NonVoluntaryCtxtSwitches)
			}
		}
	}
	return u
}

// measureLatency produces 1 KiB records at mbps MB/s (a tick per
// millisecond) to topic for d, records i going to partition i%parts,
// while one consumer reads them; every value starts with its send time.
func measureLatency(t *testing.T, c *daemontest.Cluster, topic string, parts, mbps int, d time.Duration) (r struct{ produce, e2e []time.Duration }) {
	t.Helper()
	const size = latencyRecordSize
	perMs := max(1, mbps*1_000_000/size/1000)
	total := int(d/time.Millisecond) * perMs
	at := endOffsets(t, c, topic, parts)
	cons := clusterClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.FetchMaxWait(500*time.Millisecond))
	var (
		mu   sync.Mutex
		e2e  = make([]time.Duration, 0, total)
		seen atomic.Int64
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for seen.Load() < int64(total) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			fs := cons.PollFetches(ctx)
			cancel()
			now := time.Now()
			if ctx.Err() != nil && fs.NumRecords() == 0 {
				return // stalled: report what arrived
			}
			fs.EachRecord(func(rec *kgo.Record) {
				if len(rec.Value) >= 8 {
					sent := time.Unix(0, int64(binary.BigEndian.Uint64(rec.Value)))
					mu.Lock()
					e2e = append(e2e, now.Sub(sent))
					mu.Unlock()
				}
				seen.Add(1)
			})
		}
	}()
	// Linger 0: franz-go's default (10 ms) would dominate the figures.
	prod := producer(t, c, kgo.AllISRAcks(), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	lat := make([]time.Duration, total)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	next := 0
	start := time.Now()
	for next < total {
		<-tick.C
		// Catch up on ticks the ticker dropped, so the rate holds.
		due := min(total, int(time.Since(start)/time.Millisecond+1)*perMs)
		for ; next < due; next++ {
			v := make([]byte, size)
			sent := time.Now()
			binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
			wg.Add(1)
			i := next
			prod.Produce(context.Background(), &kgo.Record{Value: v, Partition: int32(i % parts)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
				lat[i] = time.Since(sent)
				wg.Done()
			})
		}
	}
	wg.Wait()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(e2e) < total {
		t.Errorf("%s: consumer saw %d of %d records", topic, len(e2e), total)
	}
	r.produce, r.e2e = lat, slices.Clone(e2e)
	slices.Sort(r.produce)
	slices.Sort(r.e2e)
	return r
}

// endOffsets returns where each of topic's parts partitions ends, asking
// until every partition answers without error (a partition whose leader is
// not yet known answers with an error and offset -1, which the consumer
// would reject as a partition).
func endOffsets(t *testing.T, c *daemontest.Cluster, topic string, parts int) map[int32]kgo.Offset {
	t.Helper()
	adm := clusterAdmin(t, c)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(testCtx(t, 10*time.Second), topic)
		at := map[int32]kgo.Offset{}
		var bad error
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil || o.Partition < 0 || o.Offset < 0 {
				bad = fmt.Errorf("partition %d: offset %d: %v", o.Partition, o.Offset, o.Err)
				return
			}
			at[o.Partition] = kgo.NewOffset().At(o.Offset)
		})
		if err == nil && bad == nil && len(at) == parts {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("end offsets of %s: %d of %d partitions: %v %v", topic, len(at), parts, err, bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// q is quantile f of sorted durations.
func q(sorted []time.Duration, f float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(f*float64(len(sorted)-1))].Round(10 * time.Microsecond)
}

func quantiles(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %v p99 %v p99.9 %v max %v (n=%d)", q(sorted, 0.5), q(sorted, 0.99), q(sorted, 0.999), sorted[len(sorted)-1].Round(10*time.Microsecond), len(sorted))
}

func med(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
