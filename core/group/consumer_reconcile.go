package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/plugins/sdk"
)

// planTarget turns an assignor's plan into a target assignment, refusing a
// plan that names an unknown member, an unknown partition, or a partition
// twice.
func (c *Coordinator) planTarget(g *consumer, plan map[string][]sdk.TopicPartition) (map[string]map[tpid]bool, error) {
	target := map[string]map[tpid]bool{}
	seen := map[tpid]string{}
	for id := range g.members {
		target[id] = map[tpid]bool{}
	}
	for id, tps := range plan {
		if _, ok := g.members[id]; !ok {
			return nil, fmt.Errorf("group: plan names unknown member %q", id)
		}
		for _, t := range tps {
			info, ok := c.cfg.Topics.Topic(t.Topic)
			if !ok || t.Partition < 0 || t.Partition >= info.Partitions {
				return nil, fmt.Errorf("group: plan names unknown partition %s-%d", t.Topic, t.Partition)
			}
			p := tpid{info.ID, t.Partition}
			if prev, dup := seen[p]; dup && prev != id {
				return nil, fmt.Errorf("group: plan gives %s-%d to both %q and %q", t.Topic, t.Partition, prev, id)
			}
			seen[p] = id
			target[id][p] = true
		}
	}
	return target, nil
}

// reconcile moves a member towards its target. owned is what the member
// reports it owns (nil: unchanged since its last heartbeat).
//
//   - While it has partitions to revoke, it waits until a heartbeat
//     reports them gone; its epoch stays.
//   - Partitions it holds that the target does not include are moved to
//     revoking, and its assignment shrinks to what it may keep.
//   - With nothing to revoke it moves to the target epoch and takes each
//     target partition no other member still holds; the rest follow on
//     later heartbeats, as their previous owners release them.
func (c *Coordinator) reconcile(now time.Time, g *consumer, m *cmember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) {
	if owned != nil && len(m.revoking) > 0 {
		still := map[tpid]bool{}
		for _, t := range owned {
			for _, p := range t.Partitions {
				if m.revoking[tpid{t.TopicID, p}] {
					still[tpid{t.TopicID, p}] = true
				}
			}
		}
		m.revoking = still
		if len(still) == 0 {
			m.revokeDeadline = time.Time{}
		}
	}
	if len(m.revoking) > 0 {
		return
	}
	target := g.target[m.id]
	for p := range m.assigned {
		if !target[p] {
			delete(m.assigned, p)
			m.revoking[p] = true
		}
	}
	if len(m.revoking) > 0 {
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
		m.changed = true
		return
	}
	if m.epoch != g.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
		m.changed = true
	}
	for p := range target {
		if !m.assigned[p] && !g.heldByOther(p, m) {
			m.assigned[p] = true
			m.changed = true
		}
	}
}

// removeConsumerMember takes a member out (leave, expiry, fencing); its
// partitions become free and the group moves to a new epoch.
func (c *Coordinator) removeConsumerMember(ctx context.Context, now time.Time, g *group, m *cmember) {
	cg := g.consumer
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	cg.bump = true
	if len(cg.members) == 0 {
		cg.emptySince = now
	}
	c.refreshAssignment(ctx, now, g)
}

// tickConsumer expires sessions and fences members that did not revoke
// within their rebalance timeout.
func (c *Coordinator) tickConsumer(ctx context.Context, now time.Time, g *group, _ *Output) {
	cg := g.consumer
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		switch {
		case !now.Before(m.sessionDeadline):
			c.logger.Info("group: member session expired", "group", g.id, "member", id)
		case !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			c.logger.Info("group: member did not revoke in time; fencing it", "group", g.id, "member", id)
		default:
			continue
		}
		c.removeConsumerMember(ctx, now, g, m)
	}
}

// checkConsumerCommit fences commits and fetches of a KIP-848 group by
// member epoch. The epoch before the current one is accepted too: the
// member may not have seen the heartbeat response that bumped it.
func (c *Coordinator) checkConsumerCommit(now time.Time, g *group, memberID string, epoch int32, simple bool) int16 {
	cg := g.consumer
	if simple {
		if len(cg.members) == 0 {
			return 0
		}
		return kerr.UnknownMemberID.Code
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch > m.epoch:
		return kerr.FencedMemberEpoch.Code
	case epoch != m.epoch && epoch != m.prevEpoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// assignmentTopics renders partitions by topic ID for a heartbeat
// response, sorted.
func assignmentTopics(ps map[tpid]bool) []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic {
	byID := map[[16]byte][]int32{}
	for p := range ps {
		byID[p.id] = append(byID[p.id], p.partition)
	}
	ids := slices.SortedFunc(maps.Keys(byID), func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	out := []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, id := range ids {
		parts := byID[id]
		slices.Sort(parts)
		out = append(out, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: id, Partitions: parts})
	}
	return out
}

// describeAssignment renders partitions for ConsumerGroupDescribe.
func (c *Coordinator) describeAssignment(ps map[tpid]bool) kmsg.Assignment {
	var a kmsg.Assignment
	for _, t := range assignmentTopics(ps) {
		at := kmsg.AssignmentTopicPartition{TopicID: t.TopicID, Partitions: t.Partitions}
		if info, ok := c.cfg.Topics.TopicByID(t.TopicID); ok {
			at.Topic = info.Name
		}
		a.TopicPartitions = append(a.TopicPartitions, at)
	}
	return a
}
