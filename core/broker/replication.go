package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vltava/vltava/core/replica"
)

// Partition replication in cluster mode (issue 5): the leader side.
//
// A leader keeps a replica.LeaderState: followers report their log end
// offsets by fetching (followerFetched), appends move the leader's own
// (leaderAppended), and the high watermark is the minimum over the ISR,
// published through advanceHW, which wakes waiting fetches and acks=all
// produces. A follower is registered with the broker's replica.Fetchers
// (see follower.go); a partition that is neither serves nothing.

// leaderTracker is a partition's LeaderState while this broker leads it.
type leaderTracker struct {
	mu    sync.Mutex
	ls    *replica.LeaderState
	epoch int32
}

// leaderAppended recomputes the high watermark after an append on the
// leader: with the ISR down to the leader alone it follows the log end.
func (p *partition) leaderAppended(now time.Time) {
	lt := p.leader.Load()
	if lt == nil {
		return
	}
	leo := p.log.EndOffset()
	lt.mu.Lock()
	lt.ls.LeaderAppended(leo)
	hw := lt.ls.HighWatermark()
	lt.mu.Unlock()
	p.advanceHW(min(hw, leo))
}

// followerFetched records a follower's fetch offset (everything below it
// is on the follower) and advances the high watermark if it moved.
func (p *partition) followerFetched(id int32, offset int64, now time.Time) {
	lt := p.leader.Load()
	if lt == nil {
		return
	}
	leo := p.log.EndOffset()
	lt.mu.Lock()
	changed := lt.ls.FollowerFetched(id, offset, leo, now)
	hw := lt.ls.HighWatermark()
	lt.mu.Unlock()
	if changed {
		p.advanceHW(min(hw, leo))
	}
}

// becomeLeaderLocked starts leading at epoch v.leaderEpoch: the epoch
// starts at the log end, followers are tracked from now on.
// p.repl.roleMu must be held.
// With sameEpoch (the replica list changed within the epoch: a
// reassignment) the epoch cache is left alone and only the follower
// tracking starts over.
func (p *partition) becomeLeaderLocked(self int32, v *partView, now time.Time, sameEpoch bool) error {
	leo := p.log.EndOffset()
	if !sameEpoch {
		if err := p.log.AssignEpochStart(v.leaderEpoch, leo); err != nil {
			return fmt.Errorf("broker: %s: assign epoch %d at %d: %w", p, v.leaderEpoch, leo, err)
		}
	}
	ls := replica.NewLeaderState(v.replicas, v.isr, self, v.leaderEpoch, leo, now)
	ls.SeedHighWatermark(p.highWatermark()) // what it had as a follower
	p.leader.Store(&leaderTracker{ls: ls, epoch: v.leaderEpoch})
	p.leaderEpoch.Store(v.leaderEpoch)
	p.setView(v)
	p.repl.roleV.Store(int32(roleLeader))
	p.advanceHW(min(ls.HighWatermark(), leo))
	p.wake()
	return nil
}

// stopLeadingLocked drops the leader state (becoming follower or none).
func (p *partition) stopLeadingLocked() {
	p.leader.Store(nil)
}

// checkISR asks the leader state whether the ISR should shrink or grow and
// returns the new ISR to commit, if any.
func (p *partition) checkISR(now time.Time, lagMax time.Duration) (isr []int32, epoch int32, version int64, ok bool) {
	lt := p.leader.Load()
	v := p.viewOf()
	if lt == nil || v == nil || !p.isLeader() {
		return nil, 0, 0, false
	}
	leo := p.log.EndOffset()
	lt.mu.Lock()
	newISR, changed := lt.ls.ISRChange(now, lagMax, leo)
	lt.mu.Unlock()
	if !changed {
		return nil, 0, 0, false
	}
	return newISR, lt.epoch, v.version, true
}

// isrCommitted applies an ISR the store accepted.
func (p *partition) isrCommitted(epoch int32, isr []int32, partitionEpoch int32, version int64) {
	p.repl.roleMu.Lock()
	defer p.repl.roleMu.Unlock()
	lt := p.leader.Load()
	v := p.viewOf()
	if lt == nil || lt.epoch != epoch || v == nil || v.version > version {
		return
	}
	nv := *v
	nv.isr, nv.partitionEpoch, nv.version = isr, partitionEpoch, version
	p.setView(&nv)
	leo := p.log.EndOffset()
	lt.mu.Lock()
	lt.ls.SetISR(isr)
	hw := lt.ls.HighWatermark()
	lt.mu.Unlock()
	p.advanceHW(min(hw, leo))
	p.wake()
}

// isrLoop runs the leader-side ISR checks every interval until ctx ends:
// shrink laggards, expand caught-up followers, commit through the cluster
// node (compare-and-set; a deposed leader's change is refused).
func (b *Broker) isrLoop(ctx context.Context) {
	lagMax := time.Duration(b.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	interval := min(max(lagMax/4, 20*time.Millisecond), time.Second)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, p := range b.meta.Load().allPartitions() {
				b.checkPartitionISR(ctx, p, now, lagMax)
			}
		}
	}
}

func (b *Broker) checkPartitionISR(ctx context.Context, p *partition, now time.Time, lagMax time.Duration) {
	isr, epoch, version, ok := p.checkISR(now, lagMax)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := b.cl.node.AlterISR(cctx, p.topic, p.index, epoch, isr, version)
	if err != nil {
		b.logger.Info("broker: ISR change refused", "partition", p.String(), "isr", isr, "err", err)
		if lt := p.leader.Load(); lt != nil && lt.epoch == epoch {
			lt.mu.Lock()
			lt.ls.SetISR(p.viewOf().isr) // drop the pending proposal
			lt.mu.Unlock()
		}
		return
	}
	b.logger.Info("broker: ISR changed", "partition", p.String(), "isr", st.ISR, "leader_epoch", st.LeaderEpoch)
	p.isrCommitted(epoch, st.ISR, st.PartitionEpoch, st.Version)
}
