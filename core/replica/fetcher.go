package replica

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerAddr names a source broker: its node ID and host:port.
type BrokerAddr struct {
	ID   int32
	Addr string
}

// FetchClient sends replica requests to one source broker. Implementations
// must be safe for use by one goroutine at a time; Close releases the
// connection. A response's byte slices (a Fetch's record batches) may
// alias a buffer the client reuses: they are valid until its next call.
// WireDialer provides one.
type FetchClient interface {
	Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error)
	OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error)
	ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error)
	Close()
}

// Dialer returns a FetchClient for a source broker. It should not block
// on the network: a client connects on first use.
type Dialer func(leader BrokerAddr) (FetchClient, error)

// FollowerPartition is a partition this broker follows; the broker's
// partition implements it. The fetcher calls its methods from its own
// goroutine, one at a time per partition, and never after Unfollow
// returned.
type FollowerPartition interface {
	// TopicPartition names the partition in fetch requests.
	TopicPartition() (topic string, partition int32)
	// FetchState is the next fetch: the follower's log end offset, the
	// epoch of its last batch (-1 if none) and the leader epoch it knows.
	FetchState() (fetchOffset int64, lastFetchedEpoch int32, currentLeaderEpoch int32)
	// EndOffsetForEpoch is log.Log.EndOffsetForEpoch of the follower's log.
	EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64)
	// AppendFetched appends records fetched from the leader (log.Log.
	// AppendReplica; records may be empty) and takes on the leader's high
	// watermark (capped at its own log end) and log start offset.
	AppendFetched(records []byte, leaderHW, leaderLogStart int64) error
	// TruncateTo removes every batch at or after offset (log.Log.Truncate).
	TruncateTo(offset int64) error
	// TruncateFullyAndStartAt empties the log and restarts it at offset
	// (log.Log.TruncateFullyAndStartAt).
	TruncateFullyAndStartAt(offset int64) error
}

// Config configures Fetchers; zero fields take Kafka's defaults.
type Config struct {
	ReplicaID         int32         // this broker's node ID
	BrokerEpoch       int64         // ReplicaState.ReplicaEpoch (Fetch v15+); -1 unknown
	MaxWait           time.Duration // replica.fetch.wait.max.ms (500 ms)
	MinBytes          int32         // replica.fetch.min.bytes (1)
	MaxBytes          int32         // replica.fetch.response.max.bytes (10 MiB)
	PartitionMaxBytes int32         // replica.fetch.max.bytes (1 MiB)
	Backoff           time.Duration // replica.fetch.backoff.ms (1 s): after an error
	Dial              Dialer        // required
	Logger            *slog.Logger  // nil: slog.Default()
}

func (c Config) normalized() Config {
	if c.MaxWait <= 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.MinBytes <= 0 {
		c.MinBytes = 1
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 10 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Fetchers runs one fetcher goroutine per source broker, each batching
// the partitions followed from that broker into one Fetch request at a
// time. It owns the goroutines: a fetcher stops when its last partition
// is unfollowed, and Close stops every one and waits for it.
type Fetchers struct {
	cfg Config
	wg  sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	fetchers map[BrokerAddr]*fetcher
	parts    map[FollowerPartition]*followed
}

// NewFetchers returns Fetchers following nothing.
func NewFetchers(cfg Config) *Fetchers {
	return &Fetchers{
		cfg:      cfg.normalized(),
		fetchers: map[BrokerAddr]*fetcher{},
		parts:    map[FollowerPartition]*followed{},
	}
}

// followed is one partition in a fetcher.
type followed struct {
	p         FollowerPartition
	topic     string
	partition int32
	leader    BrokerAddr
	mu        sync.Mutex // held while the fetcher calls p; Unfollow takes it
	removed   bool       // guarded by mu

	// Guarded by the fetcher's mu.
	backoffUntil time.Time // no fetch before this
	outOfRange   bool      // OFFSET_OUT_OF_RANGE to resolve before the next fetch
}

// Follow makes p fetch from leader, moving it from another source broker
// if needed. Following the same leader again (new metadata: a new leader
// epoch) clears a back-off so the partition fetches at once.
func (f *Fetchers) Follow(p FollowerPartition, leader BrokerAddr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if e := f.parts[p]; e != nil {
		if e.leader == leader {
			ft := f.fetchers[leader]
			ft.mu.Lock()
			e.backoffUntil = time.Time{}
			ft.mu.Unlock()
			ft.wake()
			return
		}
		f.removeLocked(e)
	}
	topic, partition := p.TopicPartition()
	e := &followed{p: p, topic: topic, partition: partition, leader: leader}
	f.parts[p] = e
	ft := f.fetchers[leader]
	if ft == nil {
		ft = f.startFetcherLocked(leader)
	}
	ft.mu.Lock()
	ft.parts[p] = e
	ft.mu.Unlock()
	ft.wake()
}

// Unfollow stops fetching for p. When it returns, no method of p is
// running or will be called by a fetcher, so the caller may make p a
// leader. It waits for an AppendFetched or Truncate of p in progress:
// do not call it while holding a lock those methods take.
func (f *Fetchers) Unfollow(p FollowerPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.parts[p]; e != nil {
		f.removeLocked(e)
	}
}

// Following returns the source broker p fetches from.
func (f *Fetchers) Following(p FollowerPartition) (BrokerAddr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.parts[p]; e != nil {
		return e.leader, true
	}
	return BrokerAddr{}, false
}

// removeLocked takes e out of its fetcher (stopping the fetcher if it was
// the last partition) and marks it removed, waiting for a call into e.p
// in progress. The fetcher never takes f.mu, so this cannot deadlock on
// the package's own locks.
// REQUIRES: f.mu.
func (f *Fetchers) removeLocked(e *followed) {
	delete(f.parts, e.p)
	if ft := f.fetchers[e.leader]; ft != nil {
		ft.mu.Lock()
		delete(ft.parts, e.p)
		empty := len(ft.parts) == 0
		ft.mu.Unlock()
		if empty {
			delete(f.fetchers, e.leader)
			ft.cancel()
		}
	}
	e.mu.Lock()
	e.removed = true
	e.mu.Unlock()
}

// Close stops every fetcher and waits for their goroutines.
func (f *Fetchers) Close() error {
	f.mu.Lock()
	f.closed = true
	for _, e := range f.parts {
		f.removeLocked(e)
	}
	for addr, ft := range f.fetchers { // none left; for safety
		ft.cancel()
		delete(f.fetchers, addr)
	}
	f.mu.Unlock()
	f.wg.Wait()
	return nil
}

// startFetcherLocked starts the goroutine for leader.
// REQUIRES: f.mu.
func (f *Fetchers) startFetcherLocked(leader BrokerAddr) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	ft := &fetcher{
		cfg: f.cfg, leader: leader, ctx: ctx, cancel: cancel,
		wakeCh: make(chan struct{}, 1),
		parts:  map[FollowerPartition]*followed{},
		log:    f.cfg.Logger.With("source_broker", leader.ID, "addr", leader.Addr),
	}
	f.fetchers[leader] = ft
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ft.run()
	}()
	return ft
}
