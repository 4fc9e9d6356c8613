package broker

import (
	"fmt"
)

// The follower side of a partition: *partition implements
// replica.FollowerPartition, so the broker's replica.Fetchers copy the
// leader's log into it.

// FetchState reports where the next fetch from the leader starts: the log
// end offset, the epoch of the last batch this replica has, and the
// leader epoch it believes current.
func (p *partition) FetchState() (fetchOffset int64, lastFetchedEpoch int32, currentLeaderEpoch int32) {
	last, ok := p.log.LatestEpoch()
	if !ok {
		last = -1
	}
	return p.log.EndOffset(), last, p.leaderEpoch.Load()
}

// AppendFetched appends batches fetched from the leader as they are and
// moves the high watermark up to the leader's (never past the local log
// end). A leader log start beyond ours moves ours up too.
func (p *partition) AppendFetched(records []byte, leaderHW, leaderLogStart int64) error {
	if p.role() != roleFollower {
		return fmt.Errorf("broker: %s: not a follower", p)
	}
	if len(records) > 0 {
		if _, err := p.log.AppendReplica(records); err != nil {
			return err
		}
	}
	end := p.log.EndOffset()
	if leaderLogStart > p.log.StartOffset() && leaderLogStart <= end {
		if _, err := p.log.DeleteRecordsBefore(leaderLogStart); err != nil {
			return err
		}
	}
	p.advanceHW(min(leaderHW, end))
	return nil
}

// TruncateTo cuts the log back to offset, where it diverged from the
// leader's (KIP-101/KIP-320).
func (p *partition) TruncateTo(offset int64) error {
	if p.role() != roleFollower {
		return fmt.Errorf("broker: %s: not a follower", p)
	}
	if offset >= p.log.EndOffset() {
		return nil
	}
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	p.resetHW()
	return nil
}

// TopicPartition names the partition in the fetcher's requests.
func (p *partition) TopicPartition() (string, int32) { return p.topic, p.index }

// EndOffsetForEpoch is the follower log's answer for epoch.
func (p *partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return p.log.EndOffsetForEpoch(epoch)
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, when
// the leader's log starts past this replica's end.
func (p *partition) TruncateFullyAndStartAt(offset int64) error {
	if p.role() != roleFollower {
		return fmt.Errorf("broker: %s: not a follower", p)
	}
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.hw.Store(min(p.hw.Load(), offset))
	p.advanceHW(offset)
	return nil
}
