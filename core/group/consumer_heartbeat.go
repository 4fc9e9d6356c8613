package group

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// ConsumerGroupHeartbeat handles a KIP-848 heartbeat: join (epoch 0),
// leave (-1, or -2 for a static member), or a regular heartbeat that
// carries the member's owned partitions and gets its next assignment.
// ctx bounds the assignor call.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, now time.Time, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, Output) {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(e *kerr.Error, msg string) (*kmsg.ConsumerGroupHeartbeatResponse, Output) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, out
	}
	if e, msg := c.checkHeartbeat(req); e != nil {
		return fail(e, msg)
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberEpoch != 0 {
			return fail(kerr.UnknownMemberID, "")
		}
		g = &group{id: req.Group, offsets: map[tp]offset{}, consumer: newConsumer(now)}
		c.groups[req.Group] = g
	}
	if g.classic != nil {
		if !g.empty() {
			return fail(kerr.GroupIDNotFound, fmt.Sprintf("group %s is a classic group with members", req.Group))
		}
		g.classic, g.consumer = nil, newConsumer(now)
	}
	cg := g.consumer
	if req.MemberEpoch < 0 {
		c.leaveConsumer(ctx, now, g, req)
		resp.MemberID, resp.MemberEpoch = &req.MemberID, req.MemberEpoch
		c.persistDurably(g, resp, &out)
		return resp, out
	}
	m, e := c.heartbeatMember(now, g, cl, req)
	if e != nil {
		c.persistDurably(g, resp, &out) // a rejoin may have removed the old member
		return fail(e, "")
	}
	if c.updateSubscription(g, m, req) {
		cg.bump = true
	}
	c.refreshAssignment(ctx, now, g)
	full := req.Topics != nil
	c.reconcile(now, cg, m, req.Topics)
	m.sessionDeadline = now.Add(c.cfg.ConsumerSessionTimeout)
	resp.MemberID = ptr(m.id)
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	if m.changed || full {
		resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: assignmentTopics(m.assigned)}
		m.changed = false
	}
	c.persistDurably(g, resp, &out)
	return resp, out
}

// persistDurably writes what changed in a KIP-848 group; if anything
// did, resp becomes a durable reply, sent only once the records are in
// the log (the caller fails it otherwise).
func (c *Coordinator) persistDurably(g *group, resp *kmsg.ConsumerGroupHeartbeatResponse, out *Output) {
	if g.consumer == nil {
		return
	}
	c.persistConsumer(g, out)
	if len(out.Records) > 0 {
		out.Replies = append(out.Replies, Reply{Resp: resp, Durable: true})
	}
}

// leaveConsumer handles a heartbeat with a negative epoch. A static
// member leaving with -2 keeps its assignment, unused, until its session
// times out, so that its instance can come back (under a new member ID)
// without a rebalance; any other leave frees the member's partitions.
func (c *Coordinator) leaveConsumer(ctx context.Context, now time.Time, g *group, req *kmsg.ConsumerGroupHeartbeatRequest) {
	m := g.consumer.members[req.MemberID]
	switch {
	case m == nil:
	case req.MemberEpoch == -2 && m.instanceID != "":
		m.left = true
		m.sessionDeadline = now.Add(c.cfg.ConsumerSessionTimeout)
	default:
		c.removeConsumerMember(ctx, now, g, m)
	}
}

// checkHeartbeat validates a heartbeat's fields before any state changes.
func (c *Coordinator) checkHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidRequest, "group id is empty"
	case c.coordinatorError(req.Group) != 0:
		return kerr.ErrorForCode(c.coordinatorError(req.Group)).(*kerr.Error), ""
	case req.MemberID == "" && req.Version >= 1:
		return kerr.InvalidRequest, "member id is empty"
	case req.MemberEpoch < -2:
		return kerr.InvalidRequest, "member epoch is below -2"
	case req.MemberEpoch == 0 && req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return kerr.InvalidRequest, "a joining member must subscribe to topic names or a regex"
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis < 0:
		return kerr.InvalidRequest, "a joining member must set its rebalance timeout"
	case req.ServerAssignor != nil && *req.ServerAssignor != "" && !c.assignorKnown(*req.ServerAssignor):
		return kerr.UnsupportedAssignor, fmt.Sprintf("assignor %q is not configured (group.consumer.assignors)", *req.ServerAssignor)
	case len(c.cfg.Assignors) == 0:
		return kerr.UnsupportedAssignor, "no assignor is configured (group.consumer.assignors)"
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression, err.Error()
		}
	}
	return nil, ""
}

// heartbeatMember finds or creates the member a heartbeat is from and
// applies member epoch fencing.
func (c *Coordinator) heartbeatMember(now time.Time, g *group, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) (*cmember, *kerr.Error) {
	cg := g.consumer
	m := cg.members[req.MemberID]
	if req.MemberEpoch == 0 {
		inst := ""
		if req.InstanceID != nil {
			inst = *req.InstanceID
		}
		if owner, ok := cg.static[inst]; inst != "" && ok && owner != req.MemberID {
			old := cg.members[owner]
			if old == nil || !old.left {
				return nil, kerr.UnreleasedInstanceID
			}
			// The instance is back: the new member ID takes over the
			// left member's epoch and assignment, with no new epoch.
			m = c.replaceStaticConsumer(cg, old, req.MemberID, cl)
			m.clientID, m.clientHost = cl.ID, cl.Host
			return m, nil
		}
		if m != nil {
			// A rejoin: the member lost everything it had.
			c.removeConsumerMember(context.Background(), now, g, m)
		}
		id := req.MemberID
		if id == "" {
			id = newMemberID(cl.ID)
		}
		m = &cmember{id: id, instanceID: inst, assigned: map[tpid]bool{}, revoking: map[tpid]bool{}}
		cg.members[id] = m
		if inst != "" {
			cg.static[inst] = id
		}
		cg.bump = true
		m.changed = true
	} else {
		switch {
		case m == nil:
			return nil, kerr.UnknownMemberID
		case m.left:
			return nil, kerr.FencedMemberEpoch
		case req.MemberEpoch == m.epoch:
		case req.MemberEpoch == m.prevEpoch && ownedWithin(req.Topics, m.assigned):
			// The member missed the response that moved it on.
		default:
			return nil, kerr.FencedMemberEpoch
		}
	}
	m.clientID, m.clientHost = cl.ID, cl.Host
	return m, nil
}

// ownedWithin reports whether reported partitions are all in assigned.
func ownedWithin(topics []kmsg.ConsumerGroupHeartbeatRequestTopic, assigned map[tpid]bool) bool {
	for _, t := range topics {
		for _, p := range t.Partitions {
			if !assigned[tpid{t.TopicID, p}] {
				return false
			}
		}
	}
	return true
}

// updateSubscription applies the non-null subscription fields and reports
// whether the subscription changed.
func (c *Coordinator) updateSubscription(g *group, m *cmember, req *kmsg.ConsumerGroupHeartbeatRequest) bool {
	changed := false
	if req.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.RackID != nil {
		m.rack = *req.RackID
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignorPref {
		m.assignorPref, changed = *req.ServerAssignor, true
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Sorted(slices.Values(req.SubscribedTopicNames))
		if !slices.Equal(names, m.names) {
			m.names, changed = names, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re, changed = *req.SubscribedTopicRegex, nil, true
		if m.regex != "" {
			m.re, _ = compileRegex(m.regex) // checked in checkHeartbeat
		}
	}
	old := m.subscribed
	m.resolve(c.cfg.Topics)
	return changed || !maps.Equal(old, m.subscribed)
}

// refreshAssignment bumps the epoch when subscribed topics changed and
// recomputes the target assignment when the epoch is ahead of it. An
// assignor error keeps the previous target; the next heartbeat retries.
func (c *Coordinator) refreshAssignment(ctx context.Context, now time.Time, g *group) {
	cg := g.consumer
	for _, m := range cg.members {
		m.resolve(c.cfg.Topics)
	}
	if meta := cg.subscriptionMeta(c.cfg.Topics); !maps.Equal(meta, cg.subMeta) {
		cg.subMeta = meta
		cg.bump = true
	}
	if cg.bump {
		cg.epoch++
		cg.bump = false
	}
	if cg.epoch <= cg.assignmentEpoch {
		return
	}
	if len(cg.members) == 0 {
		cg.target, cg.assignmentEpoch = map[string]map[tpid]bool{}, cg.epoch
		return
	}
	a := c.chooseAssignor(cg)
	plan, err := a.Assign(ctx, c.assignmentInput(g.id, cg))
	if err != nil {
		c.logger.Warn("group: assignor failed; keeping the previous assignment", "group", g.id, "assignor", a.Name(), "err", err)
		return
	}
	target, err := c.planTarget(cg, plan.Assignments)
	if err != nil {
		c.logger.Warn("group: assignor returned an invalid plan; keeping the previous assignment", "group", g.id, "assignor", a.Name(), "err", err)
		return
	}
	cg.target, cg.assignmentEpoch, cg.assignor = target, cg.epoch, a.Name()
}

// replaceStaticConsumer moves a static member that left (epoch -2) to the member
// ID its instance rejoined with, keeping its epochs, assignment and
// target, so the group does not rebalance.
func (c *Coordinator) replaceStaticConsumer(cg *consumer, old *cmember, id string, cl Client) *cmember {
	if id == "" {
		id = newMemberID(cl.ID)
	}
	m := *old
	m.id, m.left, m.changed = id, false, true
	delete(cg.members, old.id)
	cg.members[id] = &m
	cg.static[m.instanceID] = id
	if t, ok := cg.target[old.id]; ok {
		delete(cg.target, old.id)
		cg.target[id] = t
	}
	return &m
}
