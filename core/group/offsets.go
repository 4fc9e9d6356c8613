package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// OffsetCommit handles an OffsetCommit. Accepted offsets are records in
// the Output; the reply is durable and the offsets become visible (Apply)
// only once the records are appended.
func (c *Coordinator) OffsetCommit(now time.Time, req *kmsg.OffsetCommitRequest, w Waiter) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := c.checkCommit(now, req)
	var expireMs int64
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis > 0 {
		expireMs = now.UnixMilli() + req.RetentionTimeMillis
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		info, known := c.cfg.Topics.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case code != 0:
				sp.ErrorCode = code
			case !known || rp.Partition < 0 || rp.Partition >= info.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > c.cfg.MaxMetadataBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				o := offset{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, commitMs: now.UnixMilli(), expireMs: expireMs}
				if req.Version < 6 {
					o.leaderEpoch = -1
				}
				if rp.Metadata != nil {
					o.metadata = *rp.Metadata
				}
				if req.Version == 1 && rp.Timestamp > 0 {
					o.expireMs = rp.Timestamp + c.cfg.OffsetsRetention.Milliseconds()
				}
				out.Records = append(out.Records, c.offsetRecord(req.Group, tp{rt.Topic, rp.Partition}, o))
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if code == 0 && c.groups[req.Group] == nil && len(out.Records) > 0 {
		// Committing to an unknown group creates it, empty (a "simple"
		// consumer that only stores offsets).
		c.groups[req.Group] = newClassicGroup(req.Group, now)
	}
	if invariant.Enabled && code == 0 && len(out.Records) > 0 {
		c.checkCommitCurrent(req)
	}
	out.Replies = append(out.Replies, Reply{To: w, Resp: resp, Durable: true})
	return out
}

// checkCommit applies generation fencing to a commit: a commit with
// generation -1 and no member ID is accepted only while the group has no
// members; otherwise the member and its generation (or, for KIP-848
// groups, its member epoch) must be current.
func (c *Coordinator) checkCommit(now time.Time, req *kmsg.OffsetCommitRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	if code := c.coordinatorError(req.Group); code != 0 {
		return code
	}
	g := c.groups[req.Group]
	simple := req.Generation < 0 && req.MemberID == ""
	if g == nil {
		if simple {
			return 0
		}
		if req.Version >= 9 {
			return kerr.GroupIDNotFound.Code
		}
		return kerr.IllegalGeneration.Code
	}
	if g.consumer != nil {
		return c.checkConsumerCommit(now, g, req.MemberID, req.Generation, simple)
	}
	cg := g.classic
	if simple {
		if len(cg.members) == 0 {
			return 0
		}
		return kerr.UnknownMemberID.Code
	}
	m, err := cg.checkMember(req.MemberID, req.InstanceID)
	switch {
	case cg.state == StateDead:
		return kerr.CoordinatorNotAvailable.Code
	case err != nil:
		return err.Code
	case req.Generation != cg.generation:
		return kerr.IllegalGeneration.Code
	case cg.state == StateCompletingRebalance:
		// The member has its join response but not yet its assignment.
		return kerr.RebalanceInProgress.Code
	}
	m.heartbeatDeadline = now.Add(m.sessionTimeout)
	return 0
}

// OffsetFetch handles an OffsetFetch: one group (v0-v7) or several (v8+);
// a null topic list (v2+) asks for every committed partition.
func (c *Coordinator) OffsetFetch(now time.Time, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	defer c.markUnstable(req, resp) // RequireStable (txn_offsets.go)
	if req.Version < 8 {
		var topics []kmsg.OffsetFetchRequestGroupTopic
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		rg := kmsg.OffsetFetchRequestGroup{Group: req.Group, MemberEpoch: -1}
		if req.Topics != nil || req.Version < 2 {
			rg.Topics = topics
			if rg.Topics == nil {
				rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
			}
		}
		g := c.fetchGroup(now, rg)
		resp.ErrorCode = g.ErrorCode
		if g.ErrorCode != 0 && req.Version < 2 {
			// v0 and v1 have no top-level error: each partition carries it.
			for _, t := range req.Topics {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, g.ErrorCode
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}
		for _, t := range g.Topics {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, c.fetchGroup(now, rg))
	}
	return resp
}

func (c *Coordinator) fetchGroup(now time.Time, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = rg.Group
	if rg.Group == "" {
		out.ErrorCode = kerr.InvalidGroupID.Code
		return out
	}
	if code := c.coordinatorError(rg.Group); code != 0 {
		out.ErrorCode = code
		return out
	}
	g := c.groups[rg.Group]
	if g != nil && g.consumer != nil && rg.MemberID != nil && rg.MemberEpoch >= 0 {
		if code := c.checkConsumerCommit(now, g, *rg.MemberID, rg.MemberEpoch, false); code != 0 {
			out.ErrorCode = code
			return out
		}
	}
	part := func(t string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
		empty := ""
		sp.Metadata = &empty
		if g == nil {
			return sp
		}
		if o, ok := g.offsets[tp{t, p}]; ok {
			sp.Offset, sp.LeaderEpoch = o.offset, o.leaderEpoch
			md := o.metadata
			sp.Metadata = &md
		}
		return sp
	}
	if rg.Topics == nil {
		if g == nil {
			return out
		}
		byTopic := map[string][]int32{}
		for t := range g.offsets {
			byTopic[t.topic] = append(byTopic[t.topic], t.partition)
		}
		for _, t := range sortedKeys(byTopic) {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = t
			ps := byTopic[t]
			slices.Sort(ps)
			for _, p := range ps {
				st.Partitions = append(st.Partitions, part(t, p))
			}
			out.Topics = append(out.Topics, st)
		}
		return out
	}
	for _, rt := range rg.Topics {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, p := range rt.Partitions {
			st.Partitions = append(st.Partitions, part(rt.Topic, p))
		}
		out.Topics = append(out.Topics, st)
	}
	return out
}

// OffsetDelete handles an OffsetDelete: offsets of topics the group still
// consumes are refused with GROUP_SUBSCRIBED_TO_TOPIC; others become
// tombstones (a durable reply).
func (c *Coordinator) OffsetDelete(now time.Time, req *kmsg.OffsetDeleteRequest, w Waiter) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	out.Replies = append(out.Replies, Reply{To: w, Resp: resp, Durable: true})
	g := c.groups[req.Group]
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return out
	case c.coordinatorError(req.Group) != 0:
		resp.ErrorCode = c.coordinatorError(req.Group)
		return out
	case g == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return out
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		subscribed := !g.empty() && g.subscribes(rt.Topic)
		_, known := c.cfg.Topics.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case !known:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed:
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				if _, ok := g.offsets[tp{rt.Topic, rp.Partition}]; ok {
					out.Records = append(out.Records, c.offsetTombstone(g.id, tp{rt.Topic, rp.Partition}))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return out
}

// expireOffsets drops offsets past offsets.retention.minutes of groups
// that are empty, counting from when the group became empty (or from the
// commit, whichever is later), and then the groups themselves.
func (c *Coordinator) expireOffsets(now time.Time, out *Output) {
	nowMs := now.UnixMilli()
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		if !g.empty() {
			continue
		}
		since := g.emptySince().UnixMilli()
		var expired []tp
		for t, o := range g.offsets {
			deadline := max(o.commitMs, since) + c.cfg.OffsetsRetention.Milliseconds()
			if o.expireMs != 0 {
				deadline = o.expireMs
			}
			if nowMs >= deadline {
				expired = append(expired, t)
			}
		}
		for _, t := range expired {
			out.Records = append(out.Records, c.offsetTombstone(id, t))
			delete(g.offsets, t)
		}
		if len(g.offsets) == 0 && nowMs >= since+c.cfg.OffsetsRetention.Milliseconds() {
			c.logger.Info("group: expired empty group", "group", id)
			c.tombstoneGroup(g, out)
			delete(c.groups, id)
		}
	}
}
