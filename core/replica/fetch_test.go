package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// fakePart is a FollowerPartition that records what the fetcher does.
type fakePart struct {
	mu        sync.Mutex
	leo       int64
	lastEpoch int32
	curEpoch  int32
	own       map[int32][2]int64 // EndOffsetForEpoch answers: epoch -> (found, end)
	calls     []string
}

func (p *fakePart) TopicPartition() (string, int32) { return "t", 3 }

func (p *fakePart) FetchState() (int64, int32, int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leo, p.lastEpoch, p.curEpoch
}

func (p *fakePart) EndOffsetForEpoch(e int32) (int32, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.own[e]; ok {
		return int32(a[0]), a[1]
	}
	return -1, -1
}

func (p *fakePart) record(format string, args ...any) {
	p.calls = append(p.calls, fmt.Sprintf(format, args...))
}

func (p *fakePart) AppendFetched(recs []byte, hw, ls int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for rest := recs; len(rest) > 0; n++ {
		h, _, r, err := record.Next(rest)
		if err != nil {
			return err
		}
		p.leo = h.LastOffset() + 1
		rest = r
	}
	p.record("append %d batches hw=%d start=%d", n, hw, ls)
	return nil
}

func (p *fakePart) TruncateTo(o int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("truncate %d", o)
	p.leo = min(p.leo, o)
	return nil
}

func (p *fakePart) TruncateFullyAndStartAt(o int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("restart %d", o)
	p.leo = o
	return nil
}

func (p *fakePart) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// fakeClient hands each Fetch to the test through reqs and waits for its
// answer on resps; the other requests are answered by functions.
type fakeClient struct {
	reqs        chan *kmsg.FetchRequest
	resps       chan fetchAnswer
	listOffsets func(ts int64) (int64, int16)
	forEpoch    func(epoch int32) (int32, int64, int16)
	closed      chan struct{}
}

type fetchAnswer struct {
	resp *kmsg.FetchResponse
	err  error
}

func (c *fakeClient) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-c.resps:
		return a.resp, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *fakeClient) ListOffsets(_ context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Offset, rp.ErrorCode = c.listOffsets(p.Timestamp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *fakeClient) OffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch, rp.EndOffset, rp.ErrorCode = c.forEpoch(p.LeaderEpoch)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *fakeClient) Close() { close(c.closed) }

// answer builds a one-partition fetch response.
func answer(fn func(p *kmsg.FetchResponseTopicPartition)) fetchAnswer {
	resp := kmsg.NewPtrFetchResponse()
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "t"
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition = 3
	fn(&p)
	t.Partitions = append(t.Partitions, p)
	resp.Topics = append(resp.Topics, t)
	return fetchAnswer{resp: resp}
}

// batchesAt returns n one-record batches starting at offset base.
func batchesAt(base int64, n int) []byte {
	var out []byte
	for i := range n {
		b := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("v"), Timestamp: 1})
		record.SetBaseOffset(b, base+int64(i))
		record.SetPartitionLeaderEpoch(b, 1)
		record.SetCRC(b)
		out = append(out, b...)
	}
	return out
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestFetcherResponses(t *testing.T) {
	errCode := func(e *kerr.Error) fetchAnswer {
		return answer(func(p *kmsg.FetchResponseTopicPartition) { p.ErrorCode = e.Code })
	}
	cases := []struct {
		name       string
		part       *fakePart
		list       map[int64]int64 // ListOffsets timestamp -> offset
		forEpoch   map[int32][2]int64
		answer     fetchAnswer
		refollow   bool // the answer backs off: Follow again to resume
		wantCalls  []string
		wantOffset int64 // FetchOffset of the next request
	}{
		{name: "records are appended with the leader's high watermark and log start",
			part: &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: answer(func(p *kmsg.FetchResponseTopicPartition) {
				p.HighWatermark, p.LogStartOffset, p.RecordBatches = 6, 2, batchesAt(5, 3)
			}),
			wantCalls: []string{"append 3 batches hw=6 start=2"}, wantOffset: 8},
		{name: "an empty answer still carries the high watermark",
			part: &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: answer(func(p *kmsg.FetchResponseTopicPartition) {
				p.HighWatermark, p.LogStartOffset = 5, 0
			}),
			wantCalls: []string{"append 0 batches hw=5 start=0"}, wantOffset: 5},
		{name: "a partial batch at the end of the answer is left for the next fetch",
			part: &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: answer(func(p *kmsg.FetchResponseTopicPartition) {
				b := batchesAt(5, 2)
				p.HighWatermark, p.LogStartOffset, p.RecordBatches = 7, 0, b[:len(b)-10]
			}),
			wantCalls: []string{"append 1 batches hw=7 start=0"}, wantOffset: 6},
		{name: "DivergingEpoch truncates to the leader's end of an epoch both replicas have",
			part: &fakePart{leo: 20, lastEpoch: 3, curEpoch: 4, own: map[int32][2]int64{2: {2, 15}}},
			answer: answer(func(p *kmsg.FetchResponseTopicPartition) {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 2, 12
			}),
			wantCalls: []string{"truncate 12"}, wantOffset: 12},
		{name: "DivergingEpoch beyond the follower's end of that epoch truncates to the follower's end",
			part: &fakePart{leo: 20, lastEpoch: 3, curEpoch: 4, own: map[int32][2]int64{2: {2, 11}}},
			answer: answer(func(p *kmsg.FetchResponseTopicPartition) {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 2, 12
			}),
			wantCalls: []string{"truncate 11"}, wantOffset: 11},
		{name: "DivergingEpoch of an epoch the follower lacks truncates to its own earlier epoch's end and asks again",
			part: &fakePart{leo: 20, lastEpoch: 3, curEpoch: 4, own: map[int32][2]int64{2: {1, 10}}},
			answer: answer(func(p *kmsg.FetchResponseTopicPartition) {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 2, 12
			}),
			wantCalls: []string{"truncate 10"}, wantOffset: 10},
		{name: "NOT_LEADER_OR_FOLLOWER backs off until new metadata",
			part:   &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: errCode(kerr.NotLeaderForPartition), refollow: true, wantOffset: 5},
		{name: "FENCED_LEADER_EPOCH backs off until new metadata",
			part:   &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: errCode(kerr.FencedLeaderEpoch), refollow: true, wantOffset: 5},
		{name: "UNKNOWN_LEADER_EPOCH backs off until new metadata",
			part:   &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: errCode(kerr.UnknownLeaderEpoch), refollow: true, wantOffset: 5},
		{name: "a whole-request failure backs off and retries",
			part:   &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			answer: fetchAnswer{err: io.ErrUnexpectedEOF}, wantOffset: 5},
		{name: "OFFSET_OUT_OF_RANGE below the leader's log start restarts the log there",
			part:   &fakePart{leo: 5, lastEpoch: 1, curEpoch: 2},
			list:   map[int64]int64{-2: 100, -1: 150},
			answer: errCode(kerr.OffsetOutOfRange), wantCalls: []string{"restart 100"}, wantOffset: 100},
		{name: "OFFSET_OUT_OF_RANGE past the leader's end truncates by leader epoch (KIP-101)",
			part:     &fakePart{leo: 20, lastEpoch: 3, curEpoch: 4, own: map[int32][2]int64{3: {3, 20}}},
			list:     map[int64]int64{-2: 0, -1: 17},
			forEpoch: map[int32][2]int64{3: {3, 15}},
			answer:   errCode(kerr.OffsetOutOfRange), wantCalls: []string{"truncate 15"}, wantOffset: 15},
		{name: "OFFSET_OUT_OF_RANGE without a fetched epoch truncates to the leader's log end",
			part:   &fakePart{leo: 20, lastEpoch: -1, curEpoch: 4},
			list:   map[int64]int64{-2: 0, -1: 17},
			answer: errCode(kerr.OffsetOutOfRange), wantCalls: []string{"truncate 17"}, wantOffset: 17},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := &fakeClient{
				reqs: make(chan *kmsg.FetchRequest), resps: make(chan fetchAnswer), closed: make(chan struct{}),
				listOffsets: func(ts int64) (int64, int16) {
					if o, ok := c.list[ts]; ok {
						return o, 0
					}
					return -1, kerr.UnknownServerError.Code
				},
				forEpoch: func(e int32) (int32, int64, int16) {
					if a, ok := c.forEpoch[e]; ok {
						return int32(a[0]), a[1], 0
					}
					return -1, -1, 0
				},
			}
			backoff := time.Hour // a back-off ends only by Follow
			if !c.refollow {
				backoff = time.Millisecond
			}
			fs := NewFetchers(Config{ReplicaID: 2, BrokerEpoch: 9, Backoff: backoff, Logger: quietLogger(),
				Dial: func(BrokerAddr) (FetchClient, error) { return fc, nil }})
			t.Cleanup(func() { fs.Close() })
			p := c.part
			leader := BrokerAddr{ID: 1, Addr: "leader:9092"}
			fs.Follow(p, leader)

			req := recv(t, fc.reqs)
			checkRequest(t, req, p)
			fc.resps <- c.answer
			if c.refollow {
				waitFor(t, "back-off", func() bool { return backingOff(fs, leader, p) })
				fs.Follow(p, leader)
			}
			req = recv(t, fc.reqs)
			if got := req.Topics[0].Partitions[0].FetchOffset; got != c.wantOffset {
				t.Fatalf("next fetch at %d, want %d", got, c.wantOffset)
			}
			if got := p.Calls(); !slices.Equal(got, c.wantCalls) {
				t.Fatalf("partition calls %q, want %q", got, c.wantCalls)
			}
			fs.Close()
			select {
			case <-fc.closed:
			default:
				t.Fatal("Close returned without closing the client")
			}
		})
	}
}

func checkRequest(t *testing.T, req *kmsg.FetchRequest, p *fakePart) {
	t.Helper()
	off, last, cur := p.FetchState()
	if req.ReplicaID != 2 || req.ReplicaState.ID != 2 || req.ReplicaState.Epoch != 9 {
		t.Fatalf("replica fields %d %+v", req.ReplicaID, req.ReplicaState)
	}
	if req.MaxWaitMillis != 500 || req.MinBytes != 1 || req.SessionEpoch != -1 {
		t.Fatalf("MaxWait %d MinBytes %d SessionEpoch %d", req.MaxWaitMillis, req.MinBytes, req.SessionEpoch)
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != "t" || len(req.Topics[0].Partitions) != 1 {
		t.Fatalf("topics %+v", req.Topics)
	}
	rp := req.Topics[0].Partitions[0]
	if rp.Partition != 3 || rp.FetchOffset != off || rp.LastFetchedEpoch != last || rp.CurrentLeaderEpoch != cur {
		t.Fatalf("partition %+v, want offset %d last epoch %d current %d", rp, off, last, cur)
	}
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a fetch request")
	}
	panic("unreachable")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func backingOff(fs *Fetchers, leader BrokerAddr, p FollowerPartition) bool {
	fs.mu.Lock()
	ft := fs.fetchers[leader]
	fs.mu.Unlock()
	if ft == nil {
		return false
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	e := ft.parts[p]
	return e != nil && !e.backoffUntil.IsZero()
}

// TestFetchersBatchAndMove checks one fetcher per source broker batching
// its partitions, moving a partition between brokers, and that Unfollow
// stops calls into the partition.
func TestFetchersBatchAndMove(t *testing.T) {
	clients := map[int32]*fakeClient{}
	var mu sync.Mutex
	dial := func(b BrokerAddr) (FetchClient, error) {
		mu.Lock()
		defer mu.Unlock()
		c := &fakeClient{reqs: make(chan *kmsg.FetchRequest), resps: make(chan fetchAnswer), closed: make(chan struct{})}
		clients[b.ID] = c
		return c, nil
	}
	client := func(id int32) *fakeClient {
		var c *fakeClient
		waitFor(t, "dial", func() bool { mu.Lock(); defer mu.Unlock(); c = clients[id]; return c != nil })
		return c
	}
	fs := NewFetchers(Config{ReplicaID: 2, Logger: quietLogger(), Dial: dial})
	t.Cleanup(func() { fs.Close() })
	b1, b3 := BrokerAddr{ID: 1, Addr: "b1:1"}, BrokerAddr{ID: 3, Addr: "b3:1"}
	parts := []*namedPart{{name: "a"}, {name: "b"}, {name: "c"}}
	for _, p := range parts {
		fs.Follow(p, b1)
	}
	c1 := client(1)
	// The first request may predate some Follow calls; soon one carries all.
	waitFor(t, "a batched request", func() bool {
		req := recv(t, c1.reqs)
		c1.resps <- fetchAnswer{resp: kmsg.NewPtrFetchResponse()}
		return len(req.Topics) == 3
	})
	// A request in flight when c moves still names c.
	req := recv(t, c1.reqs)
	if len(req.Topics) != 3 {
		t.Fatalf("in-flight request has %d topics, want 3", len(req.Topics))
	}
	fs.Follow(parts[2], b3)
	if got, _ := fs.Following(parts[2]); got != b3 {
		t.Fatalf("c follows %v", got)
	}
	c3 := client(3)
	if req := recv(t, c3.reqs); len(req.Topics) != 1 || req.Topics[0].Topic != "c" {
		t.Fatalf("broker 3 request %+v", req.Topics)
	}
	// Its answer reaches a and b but not c, which now belongs to broker 3.
	c1.resps <- dataFor(req)
	req = recv(t, c1.reqs)
	if len(req.Topics) != 2 {
		t.Fatalf("after the move broker 1 fetches %d topics, want 2", len(req.Topics))
	}
	for _, p := range parts {
		want := int64(1)
		if p.name == "c" {
			want = 0
		}
		if p.calls.Load() != want {
			t.Fatalf("%s got %d appends, want %d", p.name, p.calls.Load(), want)
		}
	}
	c1.resps <- fetchAnswer{resp: kmsg.NewPtrFetchResponse()}
	fs.Unfollow(parts[0])
	fs.Unfollow(parts[1])
	select {
	case <-c1.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("fetcher for broker 1 kept running with no partitions")
	}
}

// namedPart is a FollowerPartition named by topic that counts appends.
type namedPart struct {
	name  string
	leo   atomic.Int64
	calls atomic.Int64
}

func (p *namedPart) TopicPartition() (string, int32)        { return p.name, 0 }
func (p *namedPart) FetchState() (int64, int32, int32)      { return p.leo.Load(), -1, 0 }
func (p *namedPart) EndOffsetForEpoch(int32) (int32, int64) { return -1, -1 }
func (p *namedPart) TruncateTo(int64) error                 { p.calls.Add(1); return nil }
func (p *namedPart) TruncateFullyAndStartAt(o int64) error  { p.calls.Add(1); return nil }
func (p *namedPart) AppendFetched(b []byte, _, _ int64) error {
	if len(b) > 0 {
		p.calls.Add(1)
		p.leo.Add(1)
	}
	return nil
}

// dataFor answers every partition of req with one batch at its offset.
func dataFor(req *kmsg.FetchRequest) fetchAnswer {
	resp := kmsg.NewPtrFetchResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark = p.Partition, p.FetchOffset+1
			rp.RecordBatches = batchesAt(p.FetchOffset, 1)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return fetchAnswer{resp: resp}
}
