package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/tools/internal/perfstat"
)

// The raw consumer's fetch sizes are franz-go's consumer defaults, so it
// asks a broker for exactly what a default kgo consumer asks.
const (
	rawMaxWait           = 5 * time.Second // kgo.FetchMaxWait
	rawMinBytes          = 1               // kgo.FetchMinBytes
	rawMaxBytes          = 50 << 20        // kgo.FetchMaxBytes
	rawPartitionMaxBytes = 1 << 20         // kgo.FetchMaxPartitionBytes
)

// errRawDone cancels the raw consumer's fetch loops once enough records
// arrived.
var errRawDone = errors.New("enough records")

// rawPartition is one partition a raw fetch loop reads and the offset it
// fetches next.
type rawPartition struct {
	id     int32
	offset int64
}

// rawConsumer fetches a topic with plain Fetch requests and counts what
// comes back from the batch headers alone: it measures what the brokers
// serve, not how fast a client decodes records.
type rawConsumer struct {
	cl    *kgo.Client
	topic string
	id    [16]byte // the topic ID, for Fetch v13+
	want  int64
	m     *perfstat.Meter

	got      atomic.Int64 // records counted so far
	progress atomic.Int64 // UnixNano of the last response with records
}

// consumeRaw reads topic from its log start offsets until want records
// were counted, a fetch fails, or idle passes without a record. It
// returns the number of records counted.
func consumeRaw(ctx context.Context, cl *kgo.Client, topic string, m *perfstat.Meter, want int64, idle time.Duration) (int64, error) {
	rc := &rawConsumer{cl: cl, topic: topic, want: want, m: m}
	byLeader, err := rc.plan(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rc.progress.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	for leader, parts := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rc.fetchLoop(ctx, cl.Broker(int(leader)), parts); err != nil {
				cancel(err) // the first cause wins; later ones are ignored
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rc.watchIdle(ctx, idle, cancel)
	}()
	wg.Wait()
	got := rc.got.Load()
	if got >= want {
		return got, nil
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, errRawDone) {
		return got, err
	}
	return got, ctx.Err()
}

// plan finds the topic's partitions, their leaders and log start offsets,
// and groups the partitions by leader: one fetch loop per broker.
func (rc *rawConsumer) plan(ctx context.Context) (map[int32][]*rawPartition, error) {
	adm := kadm.NewClient(rc.cl)
	md, err := adm.Metadata(ctx, rc.topic)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	td, ok := md.Topics[rc.topic]
	if !ok {
		return nil, fmt.Errorf("metadata: topic %s not returned", rc.topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("metadata: topic %s: %w", rc.topic, td.Err)
	}
	rc.id = td.ID
	starts, err := adm.ListStartOffsets(ctx, rc.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	byLeader := make(map[int32][]*rawPartition)
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return nil, fmt.Errorf("partition %s/%d has no leader: %v", rc.topic, p.Partition, p.Err)
		}
		lo, ok := starts.Lookup(rc.topic, p.Partition)
		if !ok {
			return nil, fmt.Errorf("no start offset for %s/%d", rc.topic, p.Partition)
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], &rawPartition{id: p.Partition, offset: lo.Offset})
	}
	if len(byLeader) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions", rc.topic)
	}
	return byLeader, nil
}

// fetchLoop sends one Fetch request at a time to br for parts, advancing
// each partition past the batches it got, until ctx ends or a fetch fails.
func (rc *rawConsumer) fetchLoop(ctx context.Context, br *kgo.Broker, parts []*rawPartition) error {
	byID := make(map[int32]*rawPartition, len(parts))
	for _, p := range parts {
		byID[p.id] = p
	}
	for ctx.Err() == nil {
		resp, err := br.Request(ctx, rc.request(parts))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		var recs, bytes int64
		for _, t := range fr.Topics { // one topic asked: only its partitions come back
			for _, rp := range t.Partitions {
				p := byID[rp.Partition]
				if p == nil {
					return fmt.Errorf("fetch: unrequested partition %d in the response", rp.Partition)
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("fetch %s/%d at offset %d: %w", rc.topic, p.id, p.offset, err)
				}
				n, b, next, err := countBatches(rp.RecordBatches, p.offset)
				if err != nil {
					return fmt.Errorf("fetch %s/%d at offset %d: %w", rc.topic, p.id, p.offset, err)
				}
				recs, bytes, p.offset = recs+n, bytes+b, next
			}
		}
		if recs > 0 {
			rc.m.Add(recs, bytes, 0)
			rc.progress.Store(time.Now().UnixNano())
			if rc.got.Add(recs) >= rc.want {
				return errRawDone
			}
		}
	}
	return nil
}

// request builds a sessionless Fetch of parts with kgo's default sizes.
// Both the topic name and ID are set; the version kgo negotiates picks one.
func (rc *rawConsumer) request(parts []*rawPartition) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(rawMaxWait / time.Millisecond)
	req.MinBytes = rawMinBytes
	req.MaxBytes = rawMaxBytes
	req.IsolationLevel = 0 // read uncommitted, kgo's default
	req.SessionID = 0
	req.SessionEpoch = -1 // a full fetch outside any fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = rc.topic, rc.id
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.id
		rp.FetchOffset = p.offset
		rp.PartitionMaxBytes = rawPartitionMaxBytes
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// watchIdle cancels ctx with errIdle once idle passes without a response
// that carried records; it returns when ctx ends.
func (rc *rawConsumer) watchIdle(ctx context.Context, idle time.Duration, cancel context.CancelCauseFunc) {
	t := time.NewTicker(max(min(idle/4, 100*time.Millisecond), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(time.Unix(0, rc.progress.Load())) > idle {
				cancel(errIdle)
				return
			}
		}
	}
}

// countBatches walks the record batches of one partition's fetch answer,
// reading only batch headers, and returns the records and bytes at or past
// offset from and the offset to fetch next. Batches wholly before from are
// skipped (a broker may answer from the start of the batch holding from);
// a batch straddling from counts only its records from from on (exact for
// batches without offset gaps). Control batches advance the offset but
// hold no user records. A truncated batch at the end is normal (the broker
// cut the answer at the size limit) and ends the walk.
func countBatches(buf []byte, from int64) (records, bytes, next int64, err error) {
	next = from
	for len(buf) > 0 {
		h, batch, rest, err := record.Next(buf)
		if errors.Is(err, record.ErrShort) {
			break
		}
		if err != nil {
			return records, bytes, next, err
		}
		buf = rest
		if h.LastOffset() < next {
			continue
		}
		if !h.Control() {
			n := int64(h.NumRecords)
			if h.BaseOffset < next {
				n = min(n, h.LastOffset()-next+1)
			}
			records += n
		}
		bytes += int64(len(batch))
		next = h.LastOffset() + 1
	}
	return records, bytes, next, nil
}
