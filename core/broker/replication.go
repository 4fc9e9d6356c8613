package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition replication in cluster mode: the leader side lives in
// core/partition (follower tracking, the high watermark over the ISR);
// the broker runs the periodic ISR checks and commits their changes
// through the cluster node. A follower is registered with the broker's
// replica.Fetchers (clustermode.go); a partition that is neither serves
// nothing.

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
	if b.cl.node.StoreOutage() {
		// An ISR change needs the store: through a whole-store outage
		// the ISR stays as it is (a laggard holds the high watermark).
		return
	}
	before := p.ISRSize()
	prop, ok := p.CheckISR(now, lagMax)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := b.cl.node.AlterISR(cctx, p.topic, p.index, prop.LeaderEpoch, prop.ISR, prop.Version)
	switch {
	case err == nil:
	case st.Version != 0 && st.Version != prop.Version && st.LeaderEpoch == prop.LeaderEpoch && st.Leader == b.cfg.NodeID:
		// The partition's state moved on from the version the proposal
		// was based on, so no write of it can land any more: the state
		// read now is the answer, this proposal's write included if an
		// earlier attempt of it landed after all.
		b.logger.Info("broker: ISR change refused; taking the store's ISR", "partition", p.String(), "isr", prop.ISR,
			"store_isr", st.ISR, "err", err)
	case st.Version == prop.Version && (errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.UnknownTopicOrPartition)):
		// Refused by the checks before any write: the store holds the
		// state the proposal was based on.
		b.logger.Info("broker: ISR change refused", "partition", p.String(), "isr", prop.ISR, "err", err)
		p.ISRRefused(prop.LeaderEpoch)
		return
	default:
		// No answer (a timeout, an unreachable store) or a newer leader
		// epoch: the write may have landed. Keep the proposal in the
		// maximal ISR and ask again (checkISR proposes it unchanged).
		b.logger.Info("broker: ISR change undecided; keeping the larger ISR until the store answers", "partition", p.String(),
			"isr", prop.ISR, "err", err)
		p.ISRUndecided(prop.LeaderEpoch)
		return
	}
	b.logger.Info("broker: ISR changed", "partition", p.String(), "isr", st.ISR, "leader_epoch", st.LeaderEpoch)
	p.ISRCommitted(prop.LeaderEpoch, st.ISR, st.PartitionEpoch, st.Version)
	switch {
	case len(st.ISR) < before:
		b.isrShrinks.Add(1)
	case len(st.ISR) > before:
		b.isrExpands.Add(1)
	}
}
