package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/config"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
)

// inProcCluster is n brokers (IDs 1..n) in this process over one shared
// local metadata store (Options.Cluster), the fastest multi-broker
// harness. Every broker is closed by t.Cleanup.
type inProcCluster struct {
	t     *testing.T
	store sdk.MetadataStore
	// stores[id], if set, is the store broker id uses (a wrapper of store).
	stores map[int32]sdk.MetadataStore
	mu     sync.Mutex
	cfgs   map[int32]config.Broker
	bs     map[int32]*Broker
}

func startInProcCluster(t *testing.T, n int, edit ...func(*config.Broker)) *inProcCluster {
	t.Helper()
	return startInProcClusterWrapped(t, n, nil, edit...)
}

// startInProcClusterWrapped is startInProcCluster where wrap (if not
// nil) gives each broker the store it uses, given the shared one.
func startInProcClusterWrapped(t *testing.T, n int, wrap func(id int32, s sdk.MetadataStore) sdk.MetadataStore, edit ...func(*config.Broker)) *inProcCluster {
	t.Helper()
	s, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c := &inProcCluster{t: t, store: s, stores: map[int32]sdk.MetadataStore{}, cfgs: map[int32]config.Broker{}, bs: map[int32]*Broker{}}
	if wrap != nil {
		for id := int32(1); id <= int32(n); id++ {
			c.stores[id] = wrap(id, s)
		}
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for id := int32(n); id >= 1; id-- {
			if b := c.bs[id]; b != nil {
				if err := b.Close(); err != nil {
					t.Errorf("close broker %d: %v", id, err)
				}
			}
		}
		s.Close()
	})
	for id := int32(1); id <= int32(n); id++ {
		cfg := config.DefaultBroker()
		cfg.NodeID = id
		cfg.Listeners = "127.0.0.1:0"
		cfg.LogDirs = t.TempDir()
		cfg.DefaultReplicationFactor = int16(min(n, 3))
		cfg.OffsetsTopicReplicationFactor = int16(min(n, 3))
		cfg.ReplicaFetchWaitMaxMs = 50
		for _, e := range edit {
			e(&cfg)
		}
		c.cfgs[id] = cfg
		c.start(id)
	}
	c.waitFor("every broker sees every broker", func() bool {
		for _, b := range c.brokers() {
			if len(b.liveBrokers()) != n {
				return false
			}
		}
		return true
	})
	return c
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// start starts (or restarts, on the same log directory) broker id.
func (c *inProcCluster) start(id int32) *Broker {
	c.t.Helper()
	store := c.store
	if w := c.stores[id]; w != nil {
		store = w
	}
	b, err := New(c.cfgs[id], Options{Logger: testLogger(), Store: store, Cluster: true})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.bs[id] = b
	c.mu.Unlock()
	return b
}

// stop closes broker id (a controlled shutdown).
func (c *inProcCluster) stop(id int32) {
	c.t.Helper()
	c.mu.Lock()
	b := c.bs[id]
	delete(c.bs, id)
	c.mu.Unlock()
	if err := b.Close(); err != nil {
		c.t.Errorf("close broker %d: %v", id, err)
	}
}

func (c *inProcCluster) broker(id int32) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bs[id]
}

func (c *inProcCluster) brokers() []*Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Broker
	for _, b := range c.bs {
		out = append(out, b)
	}
	return out
}

func (c *inProcCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, b := range c.brokers() {
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(15 * time.Second)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *inProcCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// partitionMeta is one partition as broker id publishes it.
func (c *inProcCluster) partitionMeta(id int32, topic string, p int32) *part.View {
	b := c.broker(id)
	if b == nil {
		return nil
	}
	t := b.topic(topic)
	if t == nil || t.partition(p) == nil {
		return nil
	}
	v := t.partition(p).State().View
	return &v
}

// createAssigned creates a topic with a manual replica assignment and
// waits until every live broker knows its leaders.
func (c *inProcCluster) createAssigned(ctx context.Context, cl *kgo.Client, name string, assignment [][]int32) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for p, replicas := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		c.t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create %s: error %d %v", name, code, resp.Topics[0].ErrorMessage)
	}
	c.waitFor(name+" has a leader on every broker", func() bool {
		for _, b := range c.brokers() {
			for p := range assignment {
				v := c.partitionMeta(b.cfg.NodeID, name, int32(p))
				if v == nil || v.Leader < 0 || len(v.ISR) != len(assignment[p]) {
					return false
				}
			}
		}
		return true
	})
}

// produceAcksAll writes n records key i / value "v<i>" with acks=all.
func produceAcksAll(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads partition 0 of topic from the start until n records
// came, checking each value.
func consumeAll(ctx context.Context, t *testing.T, c *inProcCluster, topic string, n int) {
	t.Helper()
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := "v" + strconv.Itoa(got); string(r.Value) != want || r.Offset != int64(got) {
				t.Fatalf("record at %d: offset %d value %q, want %q", got, r.Offset, r.Value, want)
			}
			got++
		})
	}
}

func sortedCopy(s []int32) []int32 {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
