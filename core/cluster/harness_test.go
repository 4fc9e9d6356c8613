package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
)

// waitLimit bounds every poll; reaching it fails the test.
const waitLimit = 15 * time.Second

func testLogger() *slog.Logger {
	if os.Getenv("VLTAVA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds; what describes it on failure.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func openLocal(t *testing.T) *local.Store {
	s, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// recorder is a fake Applier that keeps every call and the role each
// partition was last given.
type recorder struct {
	id int32
	mu sync.Mutex
	// log holds one line per call, e.g. "t-0 leader e1", "t-0 follower of 2 e3",
	// "t-0 none e1", "brokers [1 2 3]", "deleted t", "fenced true".
	log    []string
	states map[TopicPartition]PartitionState
	assign map[TopicPartition][]int32
	fenced bool
	topics map[string]Topic // last ApplyTopic per topic
}

func newRecorder(id int32) *recorder {
	return &recorder{id: id, states: map[TopicPartition]PartitionState{}, assign: map[TopicPartition][]int32{}, topics: map[string]Topic{}}
}

func (r *recorder) ApplyTopic(t Topic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics[t.Name] = t
}

func (r *recorder) topic(name string) (Topic, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.topics[name]
	return t, ok
}

func (r *recorder) ApplyPartition(topic string, p int32, st PartitionState, assignment []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tp := TopicPartition{topic, p}
	role := "none"
	switch {
	case st.Leader == r.id:
		role = "leader"
	case slices.Contains(assignment, r.id) && st.Leader == NoLeader:
		role = "follower of -1"
	case slices.Contains(assignment, r.id):
		role = fmt.Sprintf("follower of %d", st.Leader)
	}
	r.log = append(r.log, fmt.Sprintf("%s %s e%d", tp, role, st.LeaderEpoch))
	r.states[tp] = st
	r.assign[tp] = assignment
}

func (r *recorder) ApplyBrokers(live []BrokerInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int32, len(live))
	for i, b := range live {
		ids[i] = b.ID
	}
	r.log = append(r.log, fmt.Sprintf("brokers %v", ids))
}

func (r *recorder) ApplyTopicDeleted(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, "deleted "+topic)
	for tp := range r.states {
		if tp.Topic == topic {
			delete(r.states, tp)
		}
	}
}

func (r *recorder) ApplyFenced(f bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fenced = f
	r.log = append(r.log, fmt.Sprintf("fenced %v", f))
}

func (r *recorder) state(tp TopicPartition) (PartitionState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.states[tp]
	return s, ok
}

// roles returns the distinct consecutive role lines for tp.
func (r *recorder) roles(tp TopicPartition) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.log {
		if rest, ok := strings.CutPrefix(l, tp.String()+" "); ok && (len(out) == 0 || out[len(out)-1] != rest) {
			out = append(out, rest)
		}
	}
	return out
}

func (r *recorder) lines(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// testCluster is Nodes over stores; stores[id] is the store broker id
// uses (all the same for the local store).
type testCluster struct {
	t      *testing.T
	stores map[int32]sdk.MetadataStore
	mu     sync.Mutex
	nodes  map[int32]*Node
	recs   map[int32]*recorder
	tune   func(*Config)
}

func newTestCluster(t *testing.T, stores map[int32]sdk.MetadataStore) *testCluster {
	c := &testCluster{t: t, stores: stores, nodes: map[int32]*Node{}, recs: map[int32]*recorder{}}
	t.Cleanup(func() {
		c.mu.Lock()
		nodes := c.nodes
		c.nodes = map[int32]*Node{}
		c.mu.Unlock()
		for _, n := range nodes {
			n.Close()
		}
	})
	return c
}

// localCluster starts n Nodes (IDs 1..n) over one shared local store.
func localCluster(t *testing.T, n int, tune func(*Config)) *testCluster {
	s := openLocal(t)
	stores := map[int32]sdk.MetadataStore{}
	for id := int32(1); id <= int32(n); id++ {
		stores[id] = s
	}
	c := newTestCluster(t, stores)
	c.tune = tune
	for id := int32(1); id <= int32(n); id++ {
		c.start(id)
	}
	c.waitController()
	eventually(t, "every node sees every broker", func() bool {
		for _, node := range c.running() {
			if len(node.Brokers()) != n {
				return false
			}
		}
		return true
	})
	return c
}

func (c *testCluster) config(id int32) Config {
	cfg := Config{
		NodeID: id, Host: "127.0.0.1", Port: 9000 + id,
		SessionTTL: 600 * time.Millisecond,
		Logger:     testLogger(),
		// Nothing listens on these ports: tests that probe listeners
		// give real ones and turn the probe back on.
		NoDeadBrokerProbe: true,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	return cfg
}

// start starts Node id with a fresh recorder.
func (c *testCluster) start(id int32) *Node {
	c.t.Helper()
	rec := newRecorder(id)
	n, err := Start(ctxT(c.t), c.stores[id], c.config(id), rec)
	if err != nil {
		c.t.Fatalf("Start node %d: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id], c.recs[id] = n, rec
	c.mu.Unlock()
	return n
}

func (c *testCluster) node(id int32) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) rec(id int32) *recorder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recs[id]
}

// stop closes Node id (its session is revoked: it leaves at once).
func (c *testCluster) stop(id int32) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	n.Close()
}

func (c *testCluster) running() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		out = append(out, n)
	}
	return out
}

// waitController waits until exactly one running Node is controller and
// every running Node names it; it returns its ID.
func (c *testCluster) waitController() int32 {
	c.t.Helper()
	var id int32
	eventually(c.t, "one controller that every node agrees on", func() bool {
		nodes := c.running()
		leaders := 0
		for _, n := range nodes {
			if n.IsController() {
				leaders++
				id = n.cfg.NodeID
			}
		}
		if leaders != 1 {
			return false
		}
		for _, n := range nodes {
			if n.ControllerID() != id {
				return false
			}
		}
		return true
	})
	return id
}

// partition waits until every running Node's view (and recorder) of tp
// satisfies cond, and returns the state.
func (c *testCluster) partition(tp TopicPartition, what string, cond func(PartitionState, []int32) bool) PartitionState {
	c.t.Helper()
	var got PartitionState
	eventually(c.t, tp.String()+" "+what, func() bool {
		for _, n := range c.running() {
			st, replicas, ok := n.Partition(tp.Topic, tp.Partition)
			if !ok || !cond(st, replicas) {
				return false
			}
			rst, ok := c.rec(n.cfg.NodeID).state(tp)
			if !ok || rst.Version != st.Version {
				return false
			}
			got = st
		}
		return true
	})
	return got
}

// flakyStore wraps a store to cut a broker off: KeepAlive and Watch can
// be made to fail with ErrUnavailable, and open watches can be broken.
type flakyStore struct {
	sdk.MetadataStore
	noKeepAlive atomic.Bool
	noWatch     atomic.Bool
	stall       atomic.Bool // watch streams deliver nothing more, silently
	mu          sync.Mutex
	streams     []*flakyStream
}

func (f *flakyStore) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	if f.noKeepAlive.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.KeepAlive(ctx, req)
}

func (f *flakyStore) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if f.noWatch.Load() {
		return nil, sdk.ErrUnavailable
	}
	s, err := f.MetadataStore.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	fs := &flakyStream{WatchStream: s, stall: &f.stall, closed: make(chan struct{})}
	f.mu.Lock()
	f.streams = append(f.streams, fs)
	f.mu.Unlock()
	return fs, nil
}

// breakWatches ends every open watch with ErrUnavailable, as a plugin
// process restart does.
func (f *flakyStore) breakWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.streams {
		s.broken.Store(true)
		s.WatchStream.Close()
	}
	f.streams = nil
}

type flakyStream struct {
	sdk.WatchStream
	broken    atomic.Bool
	stall     *atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}
}

func (s *flakyStream) Recv() (*sdk.WatchEvent, error) {
	ev, err := s.WatchStream.Recv()
	if s.broken.Load() {
		return nil, sdk.ErrUnavailable
	}
	if s.stall.Load() {
		<-s.closed // the event is lost; nothing fails
		return nil, sdk.ErrClosed
	}
	return ev, err
}

func (s *flakyStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.WatchStream.Close()
}

// frozenStore wraps a store to stand for a metadata store plugin process
// that is stopped (SIGSTOP) and then resumes: while frozen every call
// fails with ErrUnavailable and watch streams deliver nothing; thawing
// the keep-alives alone (thawKeepAlive) lets the broker learn that its
// session expired while its view still lags, as a resumed plugin answers
// the queued keep-alive before its watch has caught up.
type frozenStore struct {
	flakyStore
	frozen atomic.Bool // every call but KeepAlive fails
	noKA   atomic.Bool // KeepAlive fails
}

func (f *frozenStore) freeze() {
	f.frozen.Store(true)
	f.noKA.Store(true)
	f.stall.Store(true)
}

func (f *frozenStore) thawKeepAlive() { f.noKA.Store(false) }

func (f *frozenStore) thaw() {
	f.noKA.Store(false)
	f.frozen.Store(false)
	f.stall.Store(false)
	f.breakWatches()
}

func (f *frozenStore) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	if f.noKA.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.KeepAlive(ctx, req)
}

func (f *frozenStore) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.Get(ctx, req)
}

func (f *frozenStore) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.List(ctx, req)
}

func (f *frozenStore) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.Put(ctx, req)
}

func (f *frozenStore) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.Txn(ctx, req)
}

func (f *frozenStore) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.GrantSession(ctx, req)
}

func (f *frozenStore) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.flakyStore.Watch(ctx, req)
}

func (f *frozenStore) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	if f.frozen.Load() {
		return nil, sdk.ErrUnavailable
	}
	return f.MetadataStore.Delete(ctx, req)
}
