package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/plugins/sdk"
)

// Requested elections and reassignments, like topic writes, run on the
// Node that got the request: each partition is one compare-and-set of
// its state (and of its topic when the replica list changes), so they
// compose with the controller's writes; the controller then carries a
// reassignment to its end.

// errNoChange tells casPartition that nothing needs writing.
var errNoChange = errors.New("cluster: no change")

// casAttempts bounds the read-decide-write loop of a request against
// concurrent writers.
const casAttempts = 5

// ElectLeaders runs Kafka's ElectLeaders for parts (every partition if
// none): preferred moves leadership to the first replica if it is alive
// and in the ISR; otherwise (UNCLEAN) a partition without a leader gets
// the first live ISR member or, failing that, the first live replica.
// Each partition's result is nil or an error wrapping
// kerr.ElectionNotNeeded, kerr.PreferredLeaderNotAvailable,
// kerr.EligibleLeadersNotAvailable or kerr.UnknownTopicOrPartition.
// With no parts given, callers usually drop ElectionNotNeeded results.
func (n *Node) ElectLeaders(ctx context.Context, preferred bool, parts ...TopicPartition) map[TopicPartition]error {
	if len(parts) == 0 {
		for tp := range n.snapshot().partitions() {
			parts = append(parts, tp)
		}
		slices.SortFunc(parts, comparePartitions)
	}
	out := make(map[TopicPartition]error, len(parts))
	for _, tp := range parts {
		out[tp] = n.casPartition(ctx, tp, func(t Topic, cur PartitionState) (PartitionState, []int32, error) {
			live := n.snapshot().liveness()
			replicas := t.Assignment(tp.Partition)
			if preferred {
				next, err := preferredElection(replicas, cur, live)
				return next, nil, err
			}
			next, unclean, err := uncleanElection(replicas, cur, live)
			if err == nil && unclean {
				n.log.Warn("cluster: unclean leader election on request: acknowledged records may be lost",
					"partition", tp.String(), "leader", next.Leader)
			}
			return next, nil, err
		})
	}
	return out
}

// casPartition reads a partition, asks decide for its next state (and
// replica list, or nil to keep it), and writes both conditioned on what
// was read, retrying a few times on concurrent changes.
func (n *Node) casPartition(ctx context.Context, tp TopicPartition, decide func(Topic, PartitionState) (PartitionState, []int32, error)) error {
	for attempt := 0; ; attempt++ {
		t, cur, err := n.readPartition(ctx, tp)
		if err != nil {
			return err
		}
		next, replicas, err := decide(t, cur)
		if errors.Is(err, errNoChange) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cluster: %s: %w", tp, err)
		}
		conds := []sdk.Condition{{Key: partitionKey(tp.Topic, tp.Partition), Version: cur.Version}}
		ops := []sdk.Op{{Type: sdk.OpPut, Key: partitionKey(tp.Topic, tp.Partition), Value: next.encode()}}
		if replicas != nil {
			rec := withReplicas(t.TopicRecord, tp.Partition, replicas)
			conds = append(conds, sdk.Condition{Key: topicKey(tp.Topic), Version: t.Version})
			ops = append(ops, sdk.Op{Type: sdk.OpPut, Key: topicKey(tp.Topic), Value: encodeTopic(&rec)})
		}
		_, err = n.store.Txn(ctx, &sdk.TxnRequest{Conditions: conds, Ops: ops})
		if errors.Is(err, sdk.ErrVersionMismatch) && attempt < casAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("cluster: %s: %w", tp, err)
		}
		n.log.Info("cluster: partition changed on request", "partition", tp.String(), "leader", next.Leader,
			"leader_epoch", next.LeaderEpoch, "isr", next.ISR, "replicas", replicas)
		return nil
	}
}

// Reassignment is a reassignment in progress (ListPartitionReassignments).
type Reassignment struct {
	TopicPartition
	Replicas []int32 // target replicas followed by those being removed
	Adding   []int32
	Removing []int32
}

// Reassignments lists the reassignments in progress, sorted.
func (n *Node) Reassignments() []Reassignment {
	var out []Reassignment
	for tp, pv := range n.snapshot().partitions() {
		if pv.state.Reassigning() {
			out = append(out, Reassignment{TopicPartition: tp, Replicas: slices.Clone(pv.replicas),
				Adding: slices.Clone(pv.state.Adding), Removing: slices.Clone(pv.state.Removing)})
		}
	}
	slices.SortFunc(out, func(a, b Reassignment) int { return comparePartitions(a.TopicPartition, b.TopicPartition) })
	return out
}

// AlterReassignments starts (target non-nil) or cancels (target nil)
// reassignments, as AlterPartitionReassignments: the replica list
// becomes target followed by the current replicas not in it, `adding`
// names the new replicas and `removing` the dropped ones. The leader adds
// the new replicas to the ISR (AlterISR) as they catch up; once every
// target replica is in the ISR the controller switches the replica list
// to target, drops the removed ones from the ISR and, if the leader is
// being removed, elects the first target replica in the ISR. A cancel
// returns to the replicas before the reassignment. Each result is nil or
// wraps kerr.InvalidReplicaAssignment, kerr.NoReassignmentInProgress or
// kerr.UnknownTopicOrPartition.
func (n *Node) AlterReassignments(ctx context.Context, targets map[TopicPartition][]int32) map[TopicPartition]error {
	out := make(map[TopicPartition]error, len(targets))
	bv, err := n.brokersNow(ctx)
	for tp, target := range targets {
		if err != nil {
			out[tp] = err
			continue
		}
		out[tp] = n.casPartition(ctx, tp, func(t Topic, cur PartitionState) (PartitionState, []int32, error) {
			replicas := t.Assignment(tp.Partition)
			if target == nil {
				return cancelReassignment(replicas, cur, bv.liveness())
			}
			if err := ValidateAssignment([][]int32{target}, bv.liveness().alive); err != nil {
				return cur, nil, err
			}
			return startReassignment(replicas, cur, target)
		})
	}
	return out
}

// startReassignment computes the merged replica list and the adding and
// removing sets.
func startReassignment(replicas []int32, cur PartitionState, target []int32) (PartitionState, []int32, error) {
	original := without(replicas, cur.Adding)
	merged := append(slices.Clone(target), without(replicas, target)...)
	next := cur.Clone()
	next.Adding = without(target, original)
	next.Removing = without(replicas, target)
	next.PartitionEpoch++
	if slices.Equal(merged, replicas) && slices.Equal(next.Adding, cur.Adding) && slices.Equal(next.Removing, cur.Removing) {
		return cur, nil, errNoChange
	}
	return next, merged, nil
}

// cancelReassignment reverts to the replicas before the reassignment.
func cancelReassignment(replicas []int32, cur PartitionState, live liveness) (PartitionState, []int32, error) {
	if !cur.Reassigning() {
		return cur, nil, kerr.NoReassignmentInProgress
	}
	original := without(replicas, cur.Adding)
	next := cur.Clone()
	next.Adding, next.Removing = nil, nil
	next.ISR = intersect(cur.ISR, original)
	if len(next.ISR) == 0 {
		return cur, nil, fmt.Errorf("no original replica is in the ISR: %w", kerr.InvalidReplicaAssignment)
	}
	if !slices.Contains(original, next.Leader) {
		next.Leader = firstOf(original, next.ISR, live.eligible, NoLeader)
		next.LeaderEpoch++
	}
	next.PartitionEpoch++
	return next, original, nil
}
