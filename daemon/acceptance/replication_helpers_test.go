package acceptance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// Cluster tests run three real vltavad processes with short timeouts so
// that failovers take seconds. VLTAVA_REPLICATION_LONG=1 makes the loops
// longer.

// clusterDefaults are the broker keys every cluster test runs with.
var clusterDefaults = map[string]string{
	"broker.session.timeout.ms":        "2000",
	"broker.heartbeat.interval.ms":     "300",
	"replica.lag.time.max.ms":          "1500",
	"replica.fetch.wait.max.ms":        "200",
	"default.replication.factor":       "3",
	"min.insync.replicas":              "2",
	"offsets.topic.replication.factor": "3",
	"offsets.topic.num.partitions":     "3",
	"group.initial.rebalance.delay.ms": "0",
	"auto.leader.rebalance.enable":     "false",
}

// longRun reports whether the long variants of the loops were asked for.
func longRun() bool { return os.Getenv("VLTAVA_REPLICATION_LONG") != "" }

// startCluster starts n brokers with clusterDefaults overridden by extra
// and waits until every broker sees all n.
func startCluster(t *testing.T, n int, extra map[string]string) *daemontest.Cluster {
	t.Helper()
	return startClusterWith(t, daemontest.ClusterOptions{Brokers: n}, extra)
}

// startClusterWith is startCluster for the cluster o describes.
func startClusterWith(t *testing.T, o daemontest.ClusterOptions, extra map[string]string) *daemontest.Cluster {
	t.Helper()
	n := o.Brokers
	if testing.Short() {
		t.Skip("cluster tests start several daemons; skipped with -short")
	}
	cfg := maps.Clone(clusterDefaults)
	maps.Copy(cfg, extra)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		fmt.Fprintf(&b, "%s: %q\n", k, cfg[k])
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := daemontest.StartClusterWith(t, daemontest.Build(t), o, "--config", path, "--log-level", "debug")
	t.Cleanup(func() {
		if t.Failed() {
			// VLTAVA_KEEP_LOGS=DIR keeps every broker's whole log of a
			// failed test in DIR/<test>-<time>/broker-<id>.log.
			keep := ""
			if d := os.Getenv("VLTAVA_KEEP_LOGS"); d != "" {
				keep = filepath.Join(d, fmt.Sprintf("%s-%s", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().Format("150405.000")))
				if err := os.MkdirAll(keep, 0o755); err != nil {
					t.Log(err)
				}
			}
			for _, p := range append(c.Brokers(), c.Controllers()...) {
				t.Logf("broker %d log tail:\n%s", p.NodeID(), tail(p.Log(), 150))
				if keep != "" {
					os.WriteFile(filepath.Join(keep, fmt.Sprintf("broker-%d.log", p.NodeID())), []byte(p.Log()), 0o644)
				}
			}
			if keep != "" {
				t.Logf("broker logs kept in %s", keep)
			}
		}
	})
	waitUntil(t, 60*time.Second, fmt.Sprintf("%d live brokers", n), func() error {
		for _, p := range c.Brokers() {
			if got := brokersSeenBy(t, p.Addr()); got != n {
				return fmt.Errorf("broker %d sees %d brokers", p.NodeID(), got)
			}
		}
		return nil
	})
	return c
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// brokersSeenBy asks one broker how many brokers its Metadata lists.
func brokersSeenBy(t *testing.T, addr string) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return -1
	}
	return len(m.Brokers)
}

// waitFor polls cond every 100ms until it returns nil or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: %v", what, err)
}

// clusterAdmin is an admin client bootstrapped from every broker.
func clusterAdmin(t *testing.T, c *daemontest.Cluster) *kadm.Client {
	t.Helper()
	return kadm.NewClient(clusterClient(t, c))
}

// clusterClient is a franz-go client bootstrapped from every broker.
func clusterClient(t *testing.T, c *daemontest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.AllAddrs()...), kgo.ClientID("replication"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createReplicated creates a topic with rf replicas and waits until every
// partition has a leader and a full ISR.
func createReplicated(t *testing.T, c *daemontest.Cluster, topic string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	adm := clusterAdmin(t, c)
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	waitUntil(t, 30*time.Second, "create "+topic, func() error {
		resp, err := adm.CreateTopic(testCtx(t, 10*time.Second), partitions, rf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
	waitUntil(t, 30*time.Second, topic+" fully replicated", func() error {
		for p := range partitions {
			st, err := partitionState(t, adm, topic, p)
			if err != nil {
				return err
			}
			if st.Leader < 0 || len(st.ISR) != int(rf) {
				return fmt.Errorf("partition %d: leader %d isr %v", p, st.Leader, st.ISR)
			}
		}
		return nil
	})
}

// partState is one partition as Metadata shows it.
type partState struct {
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32
	Err                 error
}

// partitionState reads one partition's leader, epoch, replicas and ISR.
func partitionState(t *testing.T, adm *kadm.Client, topic string, p int32) (partState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return partState{}, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return partState{}, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	pd, ok := td.Partitions[p]
	if !ok {
		return partState{}, fmt.Errorf("no partition %d", p)
	}
	return partState{Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch, Replicas: pd.Replicas, ISR: pd.ISR, Err: pd.Err}, nil
}

// waitLeader waits for partition p to have a live leader other than not
// (0 for any) and returns it.
func waitLeader(t *testing.T, c *daemontest.Cluster, topic string, p int32, not int32) int32 {
	t.Helper()
	adm := clusterAdmin(t, c)
	var leader int32
	waitUntil(t, 30*time.Second, fmt.Sprintf("a leader of %s/%d other than %d", topic, p, not), func() error {
		st, err := partitionState(t, adm, topic, p)
		if err != nil {
			return err
		}
		if st.Leader <= 0 || st.Leader == not || !c.Broker(st.Leader).Running() {
			return fmt.Errorf("leader %d", st.Leader)
		}
		leader = st.Leader
		return nil
	})
	return leader
}

// waitISR waits until partition p's ISR has n members.
func waitISR(t *testing.T, c *daemontest.Cluster, topic string, p int32, n int) []int32 {
	t.Helper()
	adm := clusterAdmin(t, c)
	var isr []int32
	waitUntil(t, 30*time.Second, fmt.Sprintf("ISR of %s/%d with %d members", topic, p, n), func() error {
		st, err := partitionState(t, adm, topic, p)
		if err != nil {
			return err
		}
		if len(st.ISR) != n {
			return fmt.Errorf("ISR %v", st.ISR)
		}
		isr = st.ISR
		return nil
	})
	return isr
}

// readAllValues reads partition p from offset 0 up to its high watermark
// and returns the values by offset.
func readAllValues(t *testing.T, c *daemontest.Cluster, topic string, p int32) map[int64]string {
	t.Helper()
	adm := clusterAdmin(t, c)
	ends, err := adm.ListEndOffsets(testCtx(t, 20*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := ends.Lookup(topic, p)
	if !ok || end.Err != nil {
		t.Fatalf("end offset of %s/%d: %v", topic, p, end.Err)
	}
	out := map[int64]string{}
	if end.Offset == 0 {
		return out
	}
	cl := clusterClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t, 60*time.Second)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s/%d: got %d records before the deadline, want offsets up to %d", topic, p, len(out), end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if prev, dup := out[r.Offset]; dup && prev != string(r.Value) {
				t.Errorf("offset %d read twice with different values %q and %q", r.Offset, prev, r.Value)
			}
			out[r.Offset] = string(r.Value)
		})
		last := int64(-1)
		for o := range out {
			last = max(last, o)
		}
		if last >= end.Offset-1 {
			return out
		}
	}
}

// kadmFor is an admin client that talks to one broker only.
func kadmFor(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}
