package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/plugins/sdk"
)

// readPartition reads a partition's state and its topic from the store
// (not the view): the basis of a compare-and-set.
func (n *Node) readPartition(ctx context.Context, tp TopicPartition) (Topic, PartitionState, error) {
	t, err := n.getTopic(ctx, tp.Topic)
	if err != nil {
		return Topic{}, PartitionState{}, err
	}
	resp, err := n.store.Get(ctx, &sdk.GetRequest{Key: partitionKey(tp.Topic, tp.Partition)})
	if errors.Is(err, sdk.ErrNotFound) || tp.Partition >= t.Partitions {
		return Topic{}, PartitionState{}, fmt.Errorf("cluster: partition %s: %w", tp, kerr.UnknownTopicOrPartition)
	}
	if err != nil {
		return Topic{}, PartitionState{}, fmt.Errorf("cluster: read partition %s: %w", tp, err)
	}
	st, err := decodePartition(resp.Value, resp.Version)
	return t, st, err
}

// AlterISR is the leader's ISR change (Kafka's AlterPartition): a
// compare-and-set of /partitions/<topic>/<p> at expectVersion, made only
// if this broker still leads at leaderEpoch. It returns the new state
// (with its Version), or the current state and an error wrapping:
//
//   - kerr.FencedLeaderEpoch: the leader epoch moved on (a new leader
//     was elected); this broker must stop acting as leader at that epoch.
//   - kerr.UnknownLeaderEpoch: leaderEpoch is newer than the store's.
//   - kerr.NotLeaderForPartition: the partition is led by another broker.
//   - kerr.InvalidUpdateVersion: the state changed since expectVersion
//     (the controller removed a dead broker, say); retry from the
//     returned state.
//   - kerr.IneligibleReplica: the ISR would lack the leader, name a
//     broker that is not a replica, or add a broker that is not alive or
//     is shutting down.
//
// An ISR equal to the current one writes nothing. Shrinking is the
// leader's call; expanding requires the added brokers to be eligible.
func (n *Node) AlterISR(ctx context.Context, topic string, p int32, leaderEpoch int32, isr []int32, expectVersion int64) (PartitionState, error) {
	tp := TopicPartition{topic, p}
	t, cur, err := n.readPartition(ctx, tp)
	if err != nil {
		return cur, err
	}
	switch {
	case leaderEpoch < cur.LeaderEpoch:
		return cur, fmt.Errorf("cluster: alter ISR of %s at leader epoch %d, now %d: %w", tp, leaderEpoch, cur.LeaderEpoch, kerr.FencedLeaderEpoch)
	case leaderEpoch > cur.LeaderEpoch:
		return cur, fmt.Errorf("cluster: alter ISR of %s at leader epoch %d, store has %d: %w", tp, leaderEpoch, cur.LeaderEpoch, kerr.UnknownLeaderEpoch)
	case cur.Leader != n.cfg.NodeID:
		return cur, fmt.Errorf("cluster: alter ISR of %s: led by %d: %w", tp, cur.Leader, kerr.NotLeaderForPartition)
	case cur.Version != expectVersion:
		return cur, fmt.Errorf("cluster: alter ISR of %s at version %d, now %d: %w", tp, expectVersion, cur.Version, kerr.InvalidUpdateVersion)
	}
	if err := checkISR(isr, cur, t.Assignment(p), n.storeLiveness(ctx), n.cfg.NodeID); err != nil {
		return cur, fmt.Errorf("cluster: alter ISR of %s to %v: %w", tp, isr, err)
	}
	if slices.Equal(isr, cur.ISR) {
		return cur, nil
	}
	next := cur.Clone()
	next.ISR = slices.Clone(isr)
	next.PartitionEpoch++
	resp, err := n.store.Put(ctx, &sdk.PutRequest{Key: partitionKey(topic, p), Value: next.encode(), ExpectVersion: cur.Version})
	if errors.Is(err, sdk.ErrVersionMismatch) {
		if _, now, rerr := n.readPartition(ctx, tp); rerr == nil {
			cur = now
		}
		return cur, fmt.Errorf("cluster: alter ISR of %s: changed meanwhile: %w", tp, kerr.InvalidUpdateVersion)
	}
	if err != nil {
		return cur, fmt.Errorf("cluster: alter ISR of %s: %w", tp, err)
	}
	next.Version = resp.Version
	n.log.Info("cluster: ISR changed by the leader", "partition", tp.String(), "isr", next.ISR,
		"partition_epoch", next.PartitionEpoch)
	return next, nil
}

// storeLiveness reads registrations from the store rather than the
// view: a follower that fetched from the leader may have registered
// after the leader's view was last updated.
func (n *Node) storeLiveness(ctx context.Context) liveness {
	return func(id int32) brokerStatus {
		resp, err := n.store.Get(ctx, &sdk.GetRequest{Key: brokerKey(id)})
		if err != nil {
			return brokerDead
		}
		info, err := decodeBroker(resp.Value)
		switch {
		case err != nil:
			return brokerDead
		case info.ShuttingDown:
			return brokerShuttingDown
		}
		return brokerLive
	}
}

// checkISR applies AlterPartition's eligibility rules.
func checkISR(isr []int32, cur PartitionState, replicas []int32, live liveness, leader int32) error {
	if !slices.Contains(isr, leader) {
		return fmt.Errorf("the leader %d is not in it: %w", leader, kerr.IneligibleReplica)
	}
	seen := map[int32]bool{}
	for _, id := range isr {
		if seen[id] {
			return fmt.Errorf("broker %d named twice: %w", id, kerr.IneligibleReplica)
		}
		seen[id] = true
		if !slices.Contains(replicas, id) {
			return fmt.Errorf("broker %d is not a replica: %w", id, kerr.IneligibleReplica)
		}
		if !slices.Contains(cur.ISR, id) && !live.eligible(id) {
			return fmt.Errorf("broker %d is not alive or is shutting down: %w", id, kerr.IneligibleReplica)
		}
	}
	return nil
}
