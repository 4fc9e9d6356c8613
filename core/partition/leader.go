package partition

import (
	"fmt"
	"slices"
	"time"

	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/replica"
)

// The leader side: becoming leader, appending, tracking followers and the
// ISR. The high watermark of a leader is replica.LeaderState's: the
// minimum log end offset over the ISR, the leader's own included.

// BecomeLeaderLocked makes this broker (self) the partition's leader as v
// says. It reports whether the broker became leader (false when it
// already led at v's epoch and only the ISR or the replica list changed).
// A view with an older leader epoch than the one held is refused.
// REQUIRES: the transition lock (LockTransitions).
func (p *Partition) BecomeLeaderLocked(self int32, v View, now time.Time) (became bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.Wake()
	if v.LeaderEpoch < p.view.LeaderEpoch {
		return false, fmt.Errorf("partition: %s: leader epoch %d is older than %d", p, v.LeaderEpoch, p.view.LeaderEpoch)
	}
	leo := p.log.EndOffset()
	if p.role == Leader && p.view.LeaderEpoch == v.LeaderEpoch {
		if slices.Equal(p.view.Replicas, v.Replicas) {
			// The same epoch with a new ISR (or partition epoch).
			p.setViewLocked(v)
			p.publishLocked()
			p.lsMu.Lock()
			p.leader.SetISRAt(v.ISR, v.Version)
			p.lsMu.Unlock()
			p.recomputeHWLocked()
			return false, nil
		}
		// A reassignment within the epoch: track the new replica list,
		// keep the epoch cache.
		p.startLeadingLocked(self, v, leo, now)
		return false, nil
	}
	if last, ok := p.log.LatestEpoch(); !ok || last != v.LeaderEpoch {
		// The epoch starts at the log end, before any append under it.
		if err := p.log.AssignEpochStart(v.LeaderEpoch, leo); err != nil {
			return false, fmt.Errorf("partition: %s: assign epoch %d at %d: %w", p, v.LeaderEpoch, leo, err)
		}
	}
	p.startLeadingLocked(self, v, leo, now)
	return true, nil
}

// startLeadingLocked installs a new LeaderState for v. REQUIRES: mu (write).
func (p *Partition) startLeadingLocked(self int32, v View, leo int64, now time.Time) {
	ls := replica.NewLeaderState(v.Replicas, v.ISR, self, v.LeaderEpoch, leo, now)
	ls.SeedHighWatermark(p.hw.Load()) // what it had as a follower
	p.leader = ls
	p.role = Leader
	p.setViewLocked(v)
	p.publishLocked()
	p.advanceHW(min(ls.HighWatermark(), leo))
}

// recomputeHWLocked moves the high watermark as the LeaderState allows
// after the log end or the ISR changed. REQUIRES: mu (read), leading.
func (p *Partition) recomputeHWLocked() {
	leo := p.log.EndOffset()
	p.lsMu.Lock()
	p.leader.LeaderAppended(leo)
	hw := p.leader.HighWatermark()
	p.lsMu.Unlock()
	p.advanceHW(min(hw, leo))
}

// Leading is what AppendAsLeader's check sees: the state it appends
// under, fixed while the check and the append run.
type Leading struct {
	Epoch   int32 // the leader epoch the batch is written under
	ISRSize int   // members of the ISR
}

// AppendAsLeader appends one batch as the leader. It holds the leader/ISR
// lock for read from the leader check through check (the caller's
// validation: CRC, decompression, min.insync.replicas) and the append,
// so a leadership change waits for it and the batch is stamped with the
// epoch that was checked. ErrNotLeader if this broker does not lead the
// partition; check's error is returned as it is. The high watermark moves
// as the ISR allows.
func (p *Partition) AppendAsLeader(batch []byte, now time.Time, check func(Leading) error) (log.AppendResult, int32, error) {
	return p.AppendAsLeaderVerified(batch, now, check, nil)
}

// AppendAsLeaderVerified is AppendAsLeader with verify run under the log's
// append lock (log.AppendOptions.Verify): the transaction check of a
// transactional produce (issue 11).
func (p *Partition) AppendAsLeaderVerified(batch []byte, now time.Time, check func(Leading) error, verify func() error) (log.AppendResult, int32, error) {
	return p.appendAsLeader(batch, now, check, verify, false)
}

// AppendAsLeaderDeferred is AppendAsLeaderVerified that does not wait for
// an fsync the topic requires before acknowledging (flush.messages=1):
// when the result's DurableAt is set, the caller must call AwaitDurable
// with it before acknowledging the batch. A produce request appends all
// its partitions, then waits for them together, so their fsyncs overlap.
func (p *Partition) AppendAsLeaderDeferred(batch []byte, now time.Time, check func(Leading) error, verify func() error) (log.AppendResult, int32, error) {
	return p.appendAsLeader(batch, now, check, verify, true)
}

// AwaitDurable waits until the batches of an AppendAsLeaderDeferred below
// next are fsynced (log.Log.AwaitDurable), then moves the high watermark
// over them as the ISR allows. It waits without the leader/ISR lock: a
// leadership change meanwhile truncates the batch away (an error) or
// keeps it; either way the acks wait that follows checks the epoch.
func (p *Partition) AwaitDurable(next int64) error {
	if err := p.log.AwaitDurable(next); err != nil {
		return err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role == Leader && p.leader != nil {
		p.recomputeHWLocked()
	}
	return nil
}

func (p *Partition) appendAsLeader(batch []byte, now time.Time, check func(Leading) error, verify func() error, deferDurable bool) (log.AppendResult, int32, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Leader || p.leader == nil {
		return log.AppendResult{}, -1, ErrNotLeader
	}
	l := Leading{Epoch: p.view.LeaderEpoch, ISRSize: len(p.view.ISR)}
	if check != nil {
		if err := check(l); err != nil {
			return log.AppendResult{}, l.Epoch, err
		}
	}
	opts := log.AppendOptions{LeaderEpoch: l.Epoch, CRCChecked: true, Verify: verify, DeferDurable: deferDurable}
	if p.cfg.Load().LogAppendTime {
		opts.LogAppendTime = now.UnixMilli()
	}
	res, err := p.log.Append(batch, opts)
	if err != nil {
		return res, l.Epoch, err
	}
	p.recomputeHWLocked()
	return res, l.Epoch, nil
}

// Diverged is a follower's divergence from the leader's log (KIP-320):
// it must truncate to EndOffset, the end of Epoch on the leader.
type Diverged struct {
	Epoch     int32
	EndOffset int64
}

// ReplicaFetched is the leader side of a fetch by follower id sent for
// leader epoch: if the follower's log (fetchOffset, lastFetchedEpoch)
// diverges from the leader's it returns where to truncate; otherwise the
// follower's position is recorded and the high watermark may advance.
// ErrNotLeader when this broker no longer leads at epoch (-1: any).
func (p *Partition) ReplicaFetched(id, epoch int32, fetchOffset int64, lastFetchedEpoch int32, now time.Time) (*Diverged, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Leader || p.leader == nil || (epoch >= 0 && epoch != p.view.LeaderEpoch) {
		return nil, ErrNotLeader
	}
	if lastFetchedEpoch >= 0 {
		e, end := p.log.EndOffsetForEpoch(lastFetchedEpoch)
		if e != lastFetchedEpoch || end < fetchOffset {
			return &Diverged{Epoch: e, EndOffset: end}, nil
		}
	}
	leo := p.log.EndOffset()
	p.lsMu.Lock()
	changed := p.leader.FollowerFetched(id, fetchOffset, leo, now)
	hw := p.leader.HighWatermark()
	p.lsMu.Unlock()
	if changed {
		p.advanceHW(min(hw, leo))
	}
	return nil, nil
}

// ISRProposal is an ISR change the leader asks the controller to commit.
type ISRProposal struct {
	ISR         []int32
	LeaderEpoch int32
	Version     int64 // store version the change is based on
}

// CheckISR applies the ISR shrink and expand rules at now; ok is false
// when nothing changes or this broker does not lead.
func (p *Partition) CheckISR(now time.Time, lagMax time.Duration) (ISRProposal, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Leader || p.leader == nil {
		return ISRProposal{}, false
	}
	leo := p.log.EndOffset()
	p.lsMu.Lock()
	isr, changed := p.leader.ISRChange(now, lagMax, leo)
	p.lsMu.Unlock()
	if !changed {
		return ISRProposal{}, false
	}
	return ISRProposal{ISR: isr, LeaderEpoch: p.view.LeaderEpoch, Version: p.view.Version}, true
}

// ISRCommitted applies an ISR the store accepted for a proposal made at
// leaderEpoch; ignored if the partition moved on meanwhile.
func (p *Partition) ISRCommitted(leaderEpoch int32, isr []int32, partitionEpoch int32, version int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != Leader || p.leader == nil || p.view.LeaderEpoch != leaderEpoch || p.view.Version > version {
		return
	}
	v := p.view
	v.ISR, v.PartitionEpoch, v.Version = isr, partitionEpoch, version
	p.setViewLocked(v)
	p.publishLocked()
	p.lsMu.Lock()
	p.leader.SetISRAt(isr, version)
	p.lsMu.Unlock()
	p.recomputeHWLocked()
	p.Wake()
}

// ISRRefused drops a pending proposal made at leaderEpoch that the store
// refused without applying it (the partition's state is still the one
// the proposal was based on). An undecided earlier attempt of it stays.
func (p *Partition) ISRRefused(leaderEpoch int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.leader == nil || p.view.LeaderEpoch != leaderEpoch {
		return
	}
	p.lsMu.Lock()
	p.leader.ISRRefused()
	p.lsMu.Unlock()
	p.recomputeHWLocked()
}

// ISRUndecided keeps a proposal made at leaderEpoch whose store call
// failed without an answer (a timeout, an unreachable store: the write
// may have landed, or land later). Until a view or commit at a later
// store version arrives, the high watermark waits for the replicas it
// adds (Kafka's maximal ISR) and CheckISR proposes it again unchanged.
func (p *Partition) ISRUndecided(leaderEpoch int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.leader == nil || p.view.LeaderEpoch != leaderEpoch {
		return
	}
	p.lsMu.Lock()
	p.leader.ISRUndecided(p.view.Version)
	p.lsMu.Unlock()
}

// BecomeFollowerLocked makes the partition follow v.Leader. It reports
// whether the leader or epoch changed (the fetcher must start over).
// REQUIRES: the transition lock.
func (p *Partition) BecomeFollowerLocked(v View) (changed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.Wake()
	if v.LeaderEpoch < p.view.LeaderEpoch {
		return false, fmt.Errorf("partition: %s: leader epoch %d is older than %d", p, v.LeaderEpoch, p.view.LeaderEpoch)
	}
	same := p.role == Follower && p.view.Leader == v.Leader && p.view.LeaderEpoch == v.LeaderEpoch
	p.leader = nil
	p.role = Follower
	p.setViewLocked(v)
	p.publishLocked()
	return !same, nil
}

// BecomeNoneLocked makes the partition neither leader nor follower (not a
// replica, or offline), with v as its view; an older leader epoch in v is
// replaced by the one held. It reports whether the role changed.
// REQUIRES: the transition lock.
func (p *Partition) BecomeNoneLocked(v View) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.Wake()
	v.LeaderEpoch = max(v.LeaderEpoch, p.view.LeaderEpoch)
	changed = p.role != None
	p.leader = nil
	p.role = None
	p.setViewLocked(v)
	p.publishLocked()
	return changed
}

// FenceLocked stops leading (a fenced broker: its session lapsed); the
// view is kept, to be re-applied once the broker is registered again. It
// reports whether the partition was led. REQUIRES: the transition lock.
func (p *Partition) FenceLocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != Leader {
		return false
	}
	p.leader = nil
	p.role = None
	p.publishLocked()
	p.Wake()
	return true
}
