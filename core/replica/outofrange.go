package replica

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// resolveOutOfRange handles OFFSET_OUT_OF_RANGE for e, as Kafka's
// fetchOffsetAndTruncate does but without ever using the follower's high
// watermark:
//
//   - the leader's log start offset is above the follower's log end: the
//     follower empties its log and restarts it there;
//   - otherwise, if the follower has a last fetched epoch, the leader's
//     OffsetForLeaderEpoch answer for it gives the truncation point
//     (KIP-101);
//   - otherwise a follower log ending beyond the leader's is cut to the
//     leader's log end offset.
//
// Leader requests run without e.mu; their answers are applied under it.
// It returns errStopped once the fetcher stops; other errors back e off.
func (ft *fetcher) resolveOutOfRange(e *followed) error {
	e.mu.Lock()
	if e.removed {
		e.mu.Unlock()
		return nil
	}
	leo, lastEpoch, cur := e.p.FetchState()
	e.mu.Unlock()

	apply := func(fn func() error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.removed {
			return
		}
		if off, _, _ := e.p.FetchState(); off != leo {
			return // changed meanwhile; fetch again
		}
		if err := fn(); err != nil {
			ft.backoff(e, err)
			return
		}
		ft.mu.Lock()
		e.outOfRange = false
		ft.mu.Unlock()
	}
	fail := func(err error) error {
		if ft.ctx.Err() != nil {
			return errStopped
		}
		ft.backoff(e, err)
		return nil
	}

	start, err := ft.listOffset(e, -2, cur)
	if err != nil {
		return fail(err)
	}
	if start > leo {
		apply(func() error {
			ft.log.Info("replica: leader log starts after ours, restarting the log", "partition", fmtPartition(e), "from", leo, "start", start)
			return e.p.TruncateFullyAndStartAt(start)
		})
		return nil
	}
	if lastEpoch >= 0 {
		epoch, end, err := ft.offsetForEpoch(e, lastEpoch, cur)
		if err != nil {
			return fail(err)
		}
		if end >= 0 {
			apply(func() error { return ft.truncateDiverging(e, epoch, end) })
			return nil
		}
	}
	end, err := ft.listOffset(e, -1, cur)
	if err != nil {
		return fail(err)
	}
	apply(func() error {
		if end < leo {
			ft.log.Info("replica: truncating to the leader's log end", "partition", fmtPartition(e), "from", leo, "to", end)
			return e.p.TruncateTo(end)
		}
		return nil
	})
	return nil
}

// listOffset asks the leader for the earliest (-2) or latest (-1) offset
// of e as a replica (latest is the leader's log end offset).
func (ft *fetcher) listOffset(e *followed, ts int64, curEpoch int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = ft.cfg.ReplicaID
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = e.topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.Timestamp = e.partition, curEpoch, ts
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := ft.client.ListOffsets(ft.ctx, req)
	if err != nil {
		return 0, fmt.Errorf("replica: list offsets: %w", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != e.topic || rp.Partition != e.partition {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, fmt.Errorf("replica: list offsets: %w", err)
			}
			return rp.Offset, nil
		}
	}
	return 0, fmt.Errorf("replica: list offsets: no answer for %s", fmtPartition(e))
}

// offsetForEpoch asks the leader for the end offset of epoch.
func (ft *fetcher) offsetForEpoch(e *followed, epoch, curEpoch int32) (int32, int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = ft.cfg.ReplicaID
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = e.topic
	p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch = e.partition, curEpoch, epoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := ft.client.OffsetForLeaderEpoch(ft.ctx, req)
	if err != nil {
		return 0, 0, fmt.Errorf("replica: offset for leader epoch: %w", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != e.topic || rp.Partition != e.partition {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return 0, 0, fmt.Errorf("replica: offset for leader epoch: %w", err)
			}
			return rp.LeaderEpoch, rp.EndOffset, nil
		}
	}
	return 0, 0, fmt.Errorf("replica: offset for leader epoch: no answer for %s", fmtPartition(e))
}
