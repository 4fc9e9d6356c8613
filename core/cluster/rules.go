package cluster

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// brokerStatus is what the election rules need to know about a broker.
type brokerStatus uint8

const (
	brokerDead         brokerStatus = iota // no registration (or a registration the controller has not caught up with)
	brokerLive                             // registered
	brokerShuttingDown                     // registered, in controlled shutdown
)

// liveness answers brokerStatus for an ID.
type liveness func(id int32) brokerStatus

func (l liveness) alive(id int32) bool    { return l(id) != brokerDead }
func (l liveness) eligible(id int32) bool { return l(id) == brokerLive }

// electionKind says why the leader changed.
type electionKind uint8

const (
	electNone      electionKind = iota
	electClean                  // from the ISR
	electUnclean                // from outside the ISR: possible data loss
	electOffline                // no leader could be chosen
	electPreferred              // preferred replica restored
	electReassign               // reassignment completed
)

func (k electionKind) String() string {
	return [...]string{"none", "clean", "unclean", "offline", "preferred", "reassignment"}[k]
}

// decision is the outcome of the rules for one partition.
type decision struct {
	state    PartitionState // the new state (Version of the old one)
	replicas []int32        // the new replica list; nil if unchanged
	kind     electionKind
}

// decidePartition applies the controller's rules to one partition, in
// this order:
//
//  1. A reassignment completes once every target replica (replicas
//     minus removing) is in the ISR: the replica list becomes the
//     target, the ISR drops the removed replicas, and a leader outside
//     the target gives way to the first target replica in the ISR.
//  2. "Every leader change bumps leader_epoch and removes dead brokers
//     from the ISR": dead brokers and brokers in controlled shutdown
//     leave the ISR, unless that would empty it (Kafka keeps the last
//     ISR member so that the partition can come back with it).
//  3. A dead or absent leader is replaced by the first live ISR member
//     in replica order, preferring brokers not shutting down; a leader in
//     controlled shutdown gives way if another ISR member is eligible.
//  4. With no live ISR member the partition is offline (leader -1)
//     unless unclean election is enabled: then the first live replica
//     leads with ISR = [itself] (possible data loss).
//
// ok is false when nothing changes.
func decidePartition(replicas []int32, cur PartitionState, live liveness, unclean bool) (decision, bool) {
	next := cur.Clone()
	d := decision{kind: electNone}
	order := replicas
	if cur.Reassigning() {
		target := without(replicas, cur.Removing)
		if len(target) > 0 && containsAll(cur.ISR, target) {
			d.replicas = target
			d.kind = electReassign
			order = target
			next.ISR = intersect(next.ISR, target)
			next.Adding, next.Removing = nil, nil
			if !slices.Contains(target, next.Leader) {
				next.Leader = NoLeader
			}
		}
	}
	// Rule 2: drop dead and shutting-down brokers from the ISR, keeping
	// the leader if it stays the leader below.
	kept := slices.DeleteFunc(slices.Clone(next.ISR), func(id int32) bool {
		return !live.eligible(id) && id != next.Leader
	})
	leaderOK := next.Leader != NoLeader && live.alive(next.Leader)
	if leaderOK && !live.eligible(next.Leader) {
		// In controlled shutdown: hand over if another ISR member can lead.
		if firstOf(order, kept, live.eligible, next.Leader) != NoLeader {
			leaderOK = false
		}
	}
	if !leaderOK {
		old := next.Leader
		kept = slices.DeleteFunc(kept, func(id int32) bool { return id == old })
		next.Leader = firstOf(order, kept, live.eligible, NoLeader)
		if next.Leader == NoLeader {
			next.Leader = firstOf(order, intersectLive(next.ISR, live), live.alive, NoLeader)
			if next.Leader != NoLeader && !slices.Contains(kept, next.Leader) {
				kept = append(kept, next.Leader)
			}
		}
		if d.kind == electNone {
			d.kind = electClean
		}
		if next.Leader == NoLeader && unclean {
			if l := firstOf(order, order, live.eligible, NoLeader); l != NoLeader {
				next.Leader, kept, d.kind = l, []int32{l}, electUnclean
			} else if l := firstOf(order, order, live.alive, NoLeader); l != NoLeader {
				next.Leader, kept, d.kind = l, []int32{l}, electUnclean
			}
		}
		if next.Leader == NoLeader {
			d.kind = electOffline
		}
	}
	if len(kept) == 0 {
		kept = next.ISR // INVARIANT: the ISR is never empty
		if len(kept) == 0 {
			kept = slices.Clone(order)
		}
	}
	next.ISR = kept
	leaderChanged := next.Leader != cur.Leader
	if !leaderChanged && d.replicas == nil && slices.Equal(next.ISR, cur.ISR) {
		return decision{}, false
	}
	if leaderChanged {
		next.LeaderEpoch++
	} else if d.kind != electReassign {
		d.kind = electNone
	}
	next.PartitionEpoch++
	d.state = next
	return d, true
}

// preferredElection moves leadership to the preferred (first) replica
// when it is eligible and in the ISR.
func preferredElection(replicas []int32, cur PartitionState, live liveness) (PartitionState, error) {
	if len(replicas) == 0 {
		return cur, kerr.PreferredLeaderNotAvailable
	}
	pref := replicas[0]
	if cur.Leader == pref {
		return cur, kerr.ElectionNotNeeded
	}
	if !live.eligible(pref) || !slices.Contains(cur.ISR, pref) {
		return cur, kerr.PreferredLeaderNotAvailable
	}
	next := cur.Clone()
	next.Leader = pref
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, nil
}

// uncleanElection is ElectLeaders' UNCLEAN type: only for a partition
// without a leader; a live ISR member is still preferred, else the first
// live replica.
func uncleanElection(replicas []int32, cur PartitionState, live liveness) (PartitionState, bool, error) {
	if cur.Leader != NoLeader && live.alive(cur.Leader) {
		return cur, false, kerr.ElectionNotNeeded
	}
	next := cur.Clone()
	if l := firstOf(replicas, cur.ISR, live.alive, NoLeader); l != NoLeader {
		next.Leader = l
		next.ISR = intersectLive(cur.ISR, live)
	} else if l := firstOf(replicas, replicas, live.alive, NoLeader); l != NoLeader {
		next.Leader, next.ISR = l, []int32{l}
		next.LeaderEpoch++
		next.PartitionEpoch++
		return next, true, nil
	} else {
		return cur, false, kerr.EligibleLeadersNotAvailable
	}
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, false, nil
}

// firstOf returns the first broker of order that is in set, passes ok
// and is not skip; NoLeader if none.
func firstOf(order, set []int32, ok func(int32) bool, skip int32) int32 {
	for _, id := range order {
		if id != skip && slices.Contains(set, id) && ok(id) {
			return id
		}
	}
	return NoLeader
}

func without(list, drop []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(list), func(id int32) bool { return slices.Contains(drop, id) })
}

func intersect(list, keep []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(list), func(id int32) bool { return !slices.Contains(keep, id) })
}

func intersectLive(list []int32, live liveness) []int32 {
	return slices.DeleteFunc(slices.Clone(list), func(id int32) bool { return !live.alive(id) })
}

func containsAll(set, want []int32) bool {
	for _, id := range want {
		if !slices.Contains(set, id) {
			return false
		}
	}
	return true
}

// imbalanced returns the partitions whose preferred replica should take
// leadership back under auto.leader.rebalance.enable: for each broker,
// if more than pct percent of the partitions it prefers are led by
// someone else, those it could lead now (eligible and in the ISR).
func imbalanced(parts map[TopicPartition]partitionView, live liveness, pct int) []TopicPartition {
	preferred := map[int32]int{}
	notLed := map[int32][]TopicPartition{}
	for tp, pv := range parts {
		if len(pv.replicas) == 0 || pv.state.Reassigning() {
			continue
		}
		pref := pv.replicas[0]
		preferred[pref]++
		if pv.state.Leader != pref && live.eligible(pref) && slices.Contains(pv.state.ISR, pref) {
			notLed[pref] = append(notLed[pref], tp)
		}
	}
	var out []TopicPartition
	for id, tps := range notLed {
		if len(tps)*100 > pct*preferred[id] {
			out = append(out, tps...)
		}
	}
	slices.SortFunc(out, comparePartitions)
	return out
}
