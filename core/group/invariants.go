package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

type reqCommit = kmsg.OffsetCommitRequest

// checkInvariants checks the coordinator's `// INVARIANT:` comments over
// every group it holds. Call it only under invariant.Enabled (the
// invariants build tag): it walks all state. Each exported step calls it
// on return, so the first step that breaks an invariant panics.
func (c *Coordinator) checkInvariants() {
	for p, o := range c.parts {
		// INVARIANT: a partition is loading or loaded, never both.
		invariant.Check(o.Loading != o.Loaded, "group: partition %d is %+v", p, o)
	}
	for id, g := range c.groups {
		invariant.Check(g.id == id, "group: %q held under %q", g.id, id)
		// INVARIANT: exactly one of classic and consumer is non-nil.
		invariant.Check((g.classic == nil) != (g.consumer == nil), "group %s: classic %v, consumer %v", id, g.classic != nil, g.consumer != nil)
		// INVARIANT: every group belongs to a loaded partition.
		p := c.partitionFor(id)
		invariant.Check(c.parts[p].Loaded, "group %s held but its partition %d is %v", id, p, c.parts[p])
		if g.classic != nil {
			g.classic.checkInvariants(id)
		} else {
			g.consumer.checkInvariants(id)
		}
	}
}

// checkInvariants checks a classic group's invariants.
func (g *classic) checkInvariants(id string) {
	// INVARIANT: a group's generation never goes back.
	invariant.Check(g.generation >= g.genSeen, "group %s: generation %d after %d", id, g.generation, g.genSeen)
	g.genSeen = g.generation
	// INVARIANT: an Empty group has no members.
	invariant.Check(g.state != StateEmpty || len(g.members) == 0, "group %s: Empty with %d members", id, len(g.members))
	// INVARIANT: a group that completed a rebalance has its leader among
	// its members.
	if g.state == StateCompletingRebalance || g.state == StateStable {
		_, ok := g.members[g.leader]
		invariant.Check(ok, "group %s: %s, leader %q is not a member", id, g.state, g.leader)
	}
	for inst, mid := range g.static {
		// INVARIANT: static maps each instance to a member of that instance.
		m := g.members[mid]
		invariant.Check(m != nil && m.instanceID == inst, "group %s: instance %s maps to %q, not a member of that instance", id, inst, mid)
	}
	for mid, m := range g.members {
		invariant.Check(m.id == mid, "group %s: member %q held under %q", id, m.id, mid)
		// INVARIANT: a member waiting on JoinGroup or SyncGroup has a
		// waiter to answer.
		invariant.Check(!m.joining || m.joinW != nil, "group %s: member %s joining without a waiter", id, mid)
		invariant.Check(!m.syncing || m.syncW != nil, "group %s: member %s syncing without a waiter", id, mid)
	}
}

// checkInvariants checks a KIP-848 group's invariants.
func (g *consumer) checkInvariants(id string) {
	// INVARIANT: the group epoch never goes back, and the assignment
	// epoch never passes it.
	invariant.Check(g.epoch >= g.epochSeen, "group %s: epoch %d after %d", id, g.epoch, g.epochSeen)
	g.epochSeen = g.epoch
	invariant.Check(g.assignmentEpoch <= g.epoch, "group %s: assignment epoch %d > group epoch %d", id, g.assignmentEpoch, g.epoch)
	held := map[tpid]string{}
	for mid, m := range g.members {
		invariant.Check(m.id == mid, "group %s: member %q held under %q", id, m.id, mid)
		// INVARIANT: no member is ahead of the group's assignment.
		invariant.Check(m.epoch <= g.assignmentEpoch, "group %s: member %s at epoch %d > assignment epoch %d", id, mid, m.epoch, g.assignmentEpoch)
		// INVARIANT: a partition is in at most one member's assigned ∪
		// revoking (and never in both of one member's).
		for _, set := range []map[tpid]bool{m.assigned, m.revoking} {
			for p := range set {
				other, dup := held[p]
				invariant.Check(!dup, "group %s: partition %x-%d held by %s and %s", id, p.id[:4], p.partition, other, mid)
				held[p] = mid
			}
		}
	}
	for inst, mid := range g.static {
		m := g.members[mid]
		invariant.Check(m != nil && m.instanceID == inst, "group %s: instance %s maps to %q, not a member of that instance", id, inst, mid)
	}
}

// checkCommitCurrent checks an OffsetCommit that is about to be written.
//
// INVARIANT: committed offsets never come from a stale generation: a
// commit is written only for a group without members (generation -1, no
// member ID), or from a current member at the group's generation (classic)
// or at its member epoch or the one before (KIP-848).
func (c *Coordinator) checkCommitCurrent(req *reqCommit) {
	g := c.groups[req.Group]
	invariant.Check(c.parts[c.partitionFor(req.Group)].Loaded, "group %s: commit written for a partition not loaded", req.Group)
	if req.Generation < 0 && req.MemberID == "" {
		invariant.Check(g == nil || g.empty(), "group %s: memberless commit written while it has members", req.Group)
		return
	}
	invariant.Check(g != nil, "group %s: member commit written for an unknown group", req.Group)
	if cg := g.classic; cg != nil {
		m := cg.members[req.MemberID]
		invariant.Check(m != nil && req.Generation == cg.generation && cg.state != StateCompletingRebalance,
			"group %s: commit of member %s at generation %d written (group at %d, %s, member known %v)",
			req.Group, req.MemberID, req.Generation, cg.generation, cg.state, m != nil)
		return
	}
	m := g.consumer.members[req.MemberID]
	invariant.Check(m != nil && (req.Generation == m.epoch || req.Generation == m.prevEpoch),
		"group %s: commit of member %s at epoch %d written (member known %v)", req.Group, req.MemberID, req.Generation, m != nil)
}
