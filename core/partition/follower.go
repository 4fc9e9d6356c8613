package partition

import (
	"github.com/vltava/vltava/core/replica"
)

// The follower side: *Partition implements replica.FollowerPartition, so
// the broker's replica.Fetchers copy the leader's log into it. Each call
// holds the leader/ISR lock for read and refuses (ErrNotFollower) once the
// partition is no longer a follower, so a fetch answer that arrives after
// a transition never touches a log this broker now leads.

var _ replica.FollowerPartition = (*Partition)(nil)

// FetchState reports where the next fetch from the leader starts: the log
// end offset, the epoch of the last batch this replica has, and the
// leader epoch it believes current.
func (p *Partition) FetchState() (fetchOffset int64, lastFetchedEpoch int32, currentLeaderEpoch int32) {
	last, ok := p.log.LatestEpoch()
	if !ok {
		last = -1
	}
	return p.log.EndOffset(), last, p.LeaderEpoch()
}

// EndOffsetForEpoch is the follower log's answer for epoch.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return p.log.EndOffsetForEpoch(epoch)
}

// AppendFetched appends batches fetched from the leader as they are and
// moves the high watermark up to the leader's (never past the local log
// end). A leader log start beyond ours moves ours up too.
func (p *Partition) AppendFetched(records []byte, leaderHW, leaderLogStart int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Follower {
		return ErrNotFollower
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
func (p *Partition) TruncateTo(offset int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Follower {
		return ErrNotFollower
	}
	// Truncate also at the log end: it drops epoch cache entries no
	// batch backs.
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	p.lowerHW(p.log.EndOffset())
	return nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, when
// the leader's log starts past this replica's end.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Follower {
		return ErrNotFollower
	}
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	p.lowerHW(offset)
	p.advanceHW(offset)
	return nil
}
