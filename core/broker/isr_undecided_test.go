package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk"
)

// lostReplyStore stands for a store connection that fails after a write
// reached the store: the next Put of a key under prefix (once armed) is
// applied and then answered ErrUnavailable, as a request that timed out
// after the server committed it. From then on the broker's watch
// delivers nothing and List fails, so its view cannot repair what the
// lost answer left wrong; its other calls (keep-alives, reads, writes)
// work.
type lostReplyStore struct {
	sdk.MetadataStore
	prefix string
	armed  atomic.Bool
	lost   atomic.Bool // a reply was lost; the view is cut off since
	mu     sync.Mutex
	open   []*stallingStream
}

// heal ends the cut-off: stalled streams end, so the watcher lists again.
func (s *lostReplyStore) heal() {
	s.lost.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.open {
		w.Close()
	}
	s.open = nil
}

func (s *lostReplyStore) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	if strings.HasPrefix(req.Key, s.prefix) && s.armed.CompareAndSwap(true, false) {
		s.lost.Store(true)
		if _, err := s.MetadataStore.Put(ctx, req); err != nil {
			return nil, err
		}
		return nil, sdk.ErrUnavailable
	}
	return s.MetadataStore.Put(ctx, req)
}

func (s *lostReplyStore) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	if s.lost.Load() {
		return nil, sdk.ErrUnavailable
	}
	return s.MetadataStore.List(ctx, req)
}

func (s *lostReplyStore) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if s.lost.Load() {
		return nil, sdk.ErrUnavailable
	}
	w, err := s.MetadataStore.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	ws := &stallingStream{WatchStream: w, s: s, ctx: ctx, closed: make(chan struct{})}
	s.mu.Lock()
	s.open = append(s.open, ws)
	s.mu.Unlock()
	return ws, nil
}

type stallingStream struct {
	sdk.WatchStream
	s      *lostReplyStore
	ctx    context.Context
	once   sync.Once
	closed chan struct{}
}

func (w *stallingStream) Recv() (*sdk.WatchEvent, error) {
	ev, err := w.WatchStream.Recv()
	if w.s.lost.Load() || isClosed(w.closed) {
		select { // the event never arrives
		case <-w.closed:
			return nil, sdk.ErrClosed
		case <-w.ctx.Done():
			return nil, w.ctx.Err()
		}
	}
	return ev, err
}

func (w *stallingStream) Close() error {
	w.once.Do(func() { close(w.closed) })
	return w.WatchStream.Close()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// storeISR reads a partition's ISR from the store.
func storeISR(t *testing.T, s sdk.MetadataStore, topic string) []int32 {
	t.Helper()
	resp, err := s.Get(context.Background(), &sdk.GetRequest{Key: "/partitions/" + topic + "/0"})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		ISR []int32 `json:"isr"`
	}
	if err := json.Unmarshal(resp.Value, &st); err != nil {
		t.Fatal(err)
	}
	return st.ISR
}

// An ISR expansion whose store write landed but whose answer was lost
// (a timeout) must keep counting the added replica in the high
// watermark: the store's ISR names it, so the controller may elect it.
// Before the fix the leader dropped the proposal as refused and
// acknowledged acks=all writes that replica did not have, while the
// store's ISR held it (Kafka's rule: the leader uses the larger of the
// pending and the committed ISR until the outcome is known).
func TestUndecidedISRExpansionHoldsTheHighWatermark(t *testing.T) {
	const topic = "undecided"
	var leaderStore *lostReplyStore
	c := startInProcClusterWrapped(t, 3, func(id int32, s sdk.MetadataStore) sdk.MetadataStore {
		if id != 1 {
			return s
		}
		leaderStore = &lostReplyStore{MetadataStore: s, prefix: "/partitions/" + topic + "/"}
		return leaderStore
	}, func(cfg *config.Broker) { cfg.ReplicaLagTimeMaxMs = 1000 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c.createAssigned(ctx, cl, topic, [][]int32{{1, 2, 3}})

	// One record every replica has; then broker 3 stops fetching, as a
	// replica that hangs.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p3 := c.broker(3).topic(topic).partition(0)
	c.waitFor("broker 3 has the first record", func() bool { return p3.Log().EndOffset() == 1 })
	p3.LockTransitions()
	c.broker(3).cl.fetchers.Unfollow(p3.Partition)
	p3.UnlockTransitions()

	// Take broker 3 out of the ISR behind the leader's back (as a
	// controller would), so that the leader adds it back; the reply to
	// that write is lost.
	leaderStore.armed.Store(true)
	resp, err := c.store.Get(ctx, &sdk.GetRequest{Key: "/partitions/" + topic + "/0"})
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(resp.Value, &st); err != nil {
		t.Fatal(err)
	}
	st["isr"] = []int32{1, 2}
	st["partition_epoch"] = st["partition_epoch"].(float64) + 1
	raw, _ := json.Marshal(st)
	if _, err := c.store.Put(ctx, &sdk.PutRequest{Key: resp.Key, Value: raw, ExpectVersion: resp.Version}); err != nil {
		t.Fatal(err)
	}
	defer leaderStore.heal() // before the cluster's clean-up: a controlled shutdown needs the view
	c.waitFor("the leader's expansion back to [1 2 3] reached the store with its reply lost", func() bool {
		return leaderStore.lost.Load() && len(storeISR(t, c.store, topic)) == 3
	})

	sent := time.Now()
	res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after the lost reply"), Partition: 0})
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	isr := storeISR(t, c.store, topic)
	leo3 := p3.Log().EndOffset()
	t.Logf("acknowledged at offset %d after %v; store ISR %v; broker 3's log end %d",
		res[0].Record.Offset, time.Since(sent).Round(time.Millisecond), isr, leo3)
	if slices.Contains(isr, 3) && leo3 <= res[0].Record.Offset {
		t.Fatalf("offset %d acknowledged with acks=all while broker 3, in the store's ISR %v, has the log only up to %d",
			res[0].Record.Offset, isr, leo3)
	}
}
