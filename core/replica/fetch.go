package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
)

// fetcher is the goroutine fetching from one source broker. Lock order:
// followed.mu, then fetcher.mu; the goroutine never takes Fetchers.mu.
type fetcher struct {
	cfg    Config
	leader BrokerAddr
	ctx    context.Context
	cancel context.CancelFunc
	wakeCh chan struct{}
	log    *slog.Logger
	client FetchClient // owned by run

	mu    sync.Mutex
	parts map[FollowerPartition]*followed
}

// run is the fetcher loop: resolve out-of-range partitions, fetch for the
// others, apply the answers; until the context ends.
func (ft *fetcher) run() {
	defer func() {
		if ft.client != nil {
			ft.client.Close()
		}
	}()
	for ft.ctx.Err() == nil {
		if err := ft.round(); errors.Is(err, errStopped) {
			return
		}
	}
}

// idleWait is how long a fetcher with nothing to fetch sleeps between
// checks when no back-off expires sooner; Follow wakes it earlier.
const idleWait = 5 * time.Second

// round does one fetch. Errors are logged and turned into back-offs; only
// errStopped is returned.
func (ft *fetcher) round() error {
	if ft.client == nil {
		c, err := ft.cfg.Dial(ft.leader)
		if err != nil {
			ft.log.Warn("replica: dial failed", "err", err)
			return ft.sleep(ft.cfg.Backoff)
		}
		ft.client = c
	}
	ready, oor, wait := ft.ready(time.Now())
	for _, e := range oor {
		if err := ft.resolveOutOfRange(e); err != nil {
			return err
		}
	}
	if len(ready) == 0 {
		if len(oor) > 0 {
			return nil
		}
		return ft.sleep(wait)
	}
	req, sent := ft.request(ready)
	if len(sent) == 0 {
		return nil
	}
	resp, err := ft.client.Fetch(ft.ctx, req)
	if ft.ctx.Err() != nil {
		return errStopped
	}
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		ft.log.Warn("replica: fetch failed", "err", err)
		return ft.sleep(ft.cfg.Backoff)
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if s, ok := sent[tpKey{t.Topic, rp.Partition}]; ok {
				ft.apply(s.e, s.offset, rp)
			}
		}
	}
	return nil
}

type tpKey struct {
	topic     string
	partition int32
}

// sentPartition is a partition in the request in flight.
type sentPartition struct {
	e      *followed
	offset int64
}

// ready returns the partitions to fetch, those with an out-of-range
// offset to resolve first, and how long to wait if there is neither.
func (ft *fetcher) ready(now time.Time) (ready, oor []*followed, wait time.Duration) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	wait = idleWait
	for _, e := range ft.parts {
		switch {
		case now.Before(e.backoffUntil):
			wait = min(wait, e.backoffUntil.Sub(now))
		case e.outOfRange:
			oor = append(oor, e)
		default:
			ready = append(ready, e)
		}
	}
	return ready, oor, wait
}

// request builds the Fetch for parts from their current fetch state.
func (ft *fetcher) request(parts []*followed) (*kmsg.FetchRequest, map[tpKey]sentPartition) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = ft.cfg.ReplicaID
	req.ReplicaState.ID, req.ReplicaState.Epoch = ft.cfg.ReplicaID, ft.cfg.BrokerEpoch
	req.MaxWaitMillis = int32(ft.cfg.MaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = ft.cfg.MinBytes, ft.cfg.MaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // full fetch, no session
	sent := map[tpKey]sentPartition{}
	topics := map[string]int{}
	for _, e := range parts {
		e.mu.Lock()
		if e.removed {
			e.mu.Unlock()
			continue
		}
		off, lastEpoch, curEpoch := e.p.FetchState()
		e.mu.Unlock()
		i, ok := topics[e.topic]
		if !ok {
			i = len(req.Topics)
			topics[e.topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = e.topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch = e.partition, curEpoch
		p.FetchOffset, p.LastFetchedEpoch = off, lastEpoch
		p.LogStartOffset, p.PartitionMaxBytes = -1, ft.cfg.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
		sent[tpKey{e.topic, e.partition}] = sentPartition{e: e, offset: off}
	}
	return req, sent
}

// apply handles one partition of a fetch response sent at offset.
func (ft *fetcher) apply(e *followed, offset int64, rp *kmsg.FetchResponseTopicPartition) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed {
		return
	}
	if off, _, _ := e.p.FetchState(); off != offset {
		return // the log moved since the request: stale answer
	}
	err := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case err == nil && rp.DivergingEpoch.EndOffset >= 0:
		err = ft.truncateDiverging(e, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
	case err == nil:
		err = e.p.AppendFetched(wholeBatches(rp.RecordBatches), rp.HighWatermark, rp.LogStartOffset)
		if err != nil {
			err = fmt.Errorf("replica: append: %w", err)
		}
	case errors.Is(err, kerr.OffsetOutOfRange):
		ft.mu.Lock()
		e.outOfRange = true
		ft.mu.Unlock()
		return
	}
	if err != nil {
		ft.backoff(e, err)
	}
}

// backoff pauses e after err until the back-off passes or Follow brings
// new metadata.
func (ft *fetcher) backoff(e *followed, err error) {
	lvl := slog.LevelWarn
	if isFencing(err) {
		lvl = slog.LevelInfo // routine during leader changes
	}
	ft.log.Log(ft.ctx, lvl, "replica: partition backing off", "partition", fmtPartition(e), "err", err)
	ft.mu.Lock()
	e.backoffUntil = time.Now().Add(ft.cfg.Backoff)
	ft.mu.Unlock()
}

// truncateDiverging truncates e after the leader answered that its
// largest epoch <= the follower's last fetched one is leaderEpoch, ending
// at endOffset (KIP-320 DivergingEpoch, or OffsetForLeaderEpoch). As in
// Kafka, when the follower's own largest epoch <= leaderEpoch differs
// from it, the follower truncates to the end of its own epoch and the
// next fetch asks again with an older epoch; it never uses its high
// watermark.
// REQUIRES: e.mu.
func (ft *fetcher) truncateDiverging(e *followed, leaderEpoch int32, endOffset int64) error {
	leo, _, _ := e.p.FetchState()
	to := truncationOffset(leo, leaderEpoch, endOffset, e.p.EndOffsetForEpoch)
	if to >= leo {
		// Nothing to cut from the log, but an epoch this replica
		// assigned as a leader without appending under it must go from
		// its epoch cache, or it is sent as LastFetchedEpoch again.
		return e.p.TruncateTo(leo)
	}
	ft.log.Info("replica: truncating to the leader's log", "partition", fmtPartition(e),
		"from", leo, "to", to, "leader_epoch", leaderEpoch, "leader_end", endOffset)
	if err := e.p.TruncateTo(to); err != nil {
		return fmt.Errorf("replica: truncate to %d: %w", to, err)
	}
	return nil
}

// truncationOffset is Kafka's AbstractFetcherThread.getOffsetTruncationState
// for a known leader end offset: the offset a follower whose log ends at
// leo truncates to, given the leader's (epoch, end offset) answer and the
// follower's own EndOffsetForEpoch.
func truncationOffset(leo int64, leaderEpoch int32, leaderEnd int64, own func(int32) (int32, int64)) int64 {
	if leaderEpoch < 0 {
		return min(leaderEnd, leo)
	}
	fe, fo := own(leaderEpoch)
	switch {
	case fe < 0 || fo < 0:
		return min(leaderEnd, leo) // the follower knows no such epoch
	case fe == leaderEpoch:
		return min(leaderEnd, fo, leo)
	default:
		return min(fo, leo) // the follower's epoch diverges earlier: cut it and ask again
	}
}

// wholeBatches drops a partial batch at the end of fetched records (a
// leader may cut the last one at the byte limit).
func wholeBatches(b []byte) []byte {
	n := 0
	for rest := b; len(rest) > 0; {
		_, batch, r, err := record.Next(rest)
		if err != nil {
			if errors.Is(err, record.ErrShort) {
				return b[:n]
			}
			return b // corrupt: AppendFetched rejects it
		}
		n += len(batch)
		rest = r
	}
	return b
}

// errStopped is returned inside a fetcher once its context is done.
var errStopped = errors.New("replica: fetcher stopped")

// sleep waits d or until the fetcher stops or is woken.
func (ft *fetcher) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ft.ctx.Done():
		return errStopped
	case <-ft.wakeCh:
		return nil
	case <-t.C:
		return nil
	}
}

func (ft *fetcher) wake() {
	select {
	case ft.wakeCh <- struct{}{}:
	default:
	}
}

// fmtPartition names a partition in log lines and errors.
func fmtPartition(e *followed) string { return fmt.Sprintf("%s-%d", e.topic, e.partition) }

// isFencing reports the partition errors that mean this broker's view of
// the leadership is stale: back off until new metadata arrives.
func isFencing(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch) ||
		errors.Is(err, kerr.UnknownLeaderEpoch) || errors.Is(err, kerr.UnknownTopicOrPartition)
}
