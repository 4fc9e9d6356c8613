package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// JoinGroup handles a classic JoinGroup. The reply to w comes in this
// Output when the request fails or can be answered at once, else in the
// Output of the step that completes the rebalance.
func (c *Coordinator) JoinGroup(now time.Time, cl Client, req *kmsg.JoinGroupRequest, w Waiter) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	fail := func(code int16, memberID string) Output {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID, resp.Generation = code, memberID, -1
		out.reply(w, resp)
		return out
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID.Code, req.MemberID)
	case c.coordinatorError(req.Group) != 0:
		return fail(c.coordinatorError(req.Group), req.MemberID)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout.Code, req.MemberID)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return fail(kerr.UnknownMemberID.Code, req.MemberID)
		}
		g = newClassicGroup(req.Group, now)
		c.groups[req.Group] = g
	}
	if g.consumer != nil {
		if len(g.consumer.members) > 0 {
			return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		}
		// An empty KIP-848 group turns classic, keeping its offsets.
		c.tombstoneConsumer(g, g.consumer, &out)
		g.consumer, g.classic = nil, newClassic(now)
	}
	cg := g.classic
	if cg.state == StateDead {
		return fail(kerr.CoordinatorNotAvailable.Code, req.MemberID)
	}
	if !cg.supports(req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session // v0 has no rebalance timeout
	}
	j := join{cl: cl, req: req, w: w, session: session, rebalance: rebalance}
	if req.MemberID == "" {
		c.joinUnknown(now, g, j, &out)
	} else {
		c.joinKnown(now, g, j, &out)
	}
	return out
}

// join carries one JoinGroup through the helpers.
type join struct {
	cl                 Client
	req                *kmsg.JoinGroupRequest
	w                  Waiter
	session, rebalance time.Duration
}

func (j join) instanceID() string {
	if j.req.InstanceID == nil {
		return ""
	}
	return *j.req.InstanceID
}

func (j join) fail(out *Output, code int16, memberID string) {
	resp := j.req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.MemberID, resp.Generation = code, memberID, -1
	out.reply(j.w, resp)
}

// joinUnknown admits a member without a member ID.
func (c *Coordinator) joinUnknown(now time.Time, g *group, j join, out *Output) {
	cg := g.classic
	id := newMemberID(j.cl.ID)
	if inst := j.instanceID(); inst != "" {
		if old, ok := cg.static[inst]; ok {
			c.replaceStatic(now, g, cg.members[old], id, j, out)
			return
		}
		c.addMember(now, g, id, j, out)
		return
	}
	if j.req.Version >= 4 {
		// KIP-394: hand out the ID and wait for the member to come back
		// with it, so a client that never does leaves no member behind.
		cg.pending[id] = now.Add(j.session)
		j.fail(out, kerr.MemberIDRequired.Code, id)
		return
	}
	c.addMember(now, g, id, j, out)
}

// joinKnown handles a member that names its member ID.
func (c *Coordinator) joinKnown(now time.Time, g *group, j join, out *Output) {
	cg := g.classic
	id := j.req.MemberID
	if _, ok := cg.pending[id]; ok {
		delete(cg.pending, id)
		c.addMember(now, g, id, j, out)
		return
	}
	m, err := cg.checkMember(id, j.req.InstanceID)
	if err != nil {
		j.fail(out, err.Code, id)
		return
	}
	m.heartbeatDeadline = now.Add(j.session)
	switch cg.state {
	case StatePreparingRebalance:
		c.updateMember(m, j)
		c.tryCompleteJoin(now, g, out)
	case StateCompletingRebalance:
		if m.sameProtocols(j.req.Protocols) {
			// The member lost the join response; give it again.
			m.joinW, m.joinV, m.joining = j.w, j.req.Version, true
			c.replyJoin(cg, m, out)
			return
		}
		c.updateMember(m, j)
		c.prepareRebalance(now, g, out)
	case StateStable:
		if m.id == cg.leader || !m.sameProtocols(j.req.Protocols) {
			c.updateMember(m, j)
			c.prepareRebalance(now, g, out)
			return
		}
		m.joinW, m.joinV, m.joining = j.w, j.req.Version, true
		c.replyJoin(cg, m, out)
	default:
		j.fail(out, kerr.UnknownMemberID.Code, id)
	}
}

// updateMember records a (re)join and parks its request.
func (c *Coordinator) updateMember(m *member, j join) {
	m.protocols = j.req.Protocols
	m.protocolType = j.req.ProtocolType
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.clientID, m.clientHost = j.cl.ID, j.cl.Host
	m.joinW, m.joinV, m.joining = j.w, j.req.Version, true
}

func (c *Coordinator) addMember(now time.Time, g *group, id string, j join, out *Output) {
	cg := g.classic
	cg.seq++
	m := &member{id: id, instanceID: j.instanceID(), seq: cg.seq, heartbeatDeadline: now.Add(j.session)}
	c.updateMember(m, j)
	cg.members[id] = m
	if m.instanceID != "" {
		cg.static[m.instanceID] = id
	}
	if len(cg.members) == 1 {
		cg.protocolType = j.req.ProtocolType
	}
	if cg.state == StatePreparingRebalance && !cg.initialDelayCap.IsZero() {
		// A new member during the initial delay extends it (up to the
		// cap), so a group that is starting up settles in one round.
		cg.rebalanceDeadline = minTime(now.Add(c.cfg.InitialRebalanceDelay), cg.initialDelayCap)
	}
	c.prepareRebalance(now, g, out)
	c.tryCompleteJoin(now, g, out)
}

// replaceStatic gives a static member's place to a new member ID: the old
// ID is fenced. A Stable group whose selected protocol stays the same does
// not rebalance; the member gets its old assignment back.
func (c *Coordinator) replaceStatic(now time.Time, g *group, old *member, id string, j join, out *Output) {
	cg := g.classic
	fence := func(w Waiter, waiting bool, v int16, sync bool) {
		if !waiting {
			return
		}
		if sync {
			resp := kmsg.NewPtrSyncGroupResponse()
			resp.Version, resp.ErrorCode = v, kerr.FencedInstanceID.Code
			out.reply(w, resp)
			return
		}
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version, resp.ErrorCode, resp.MemberID, resp.Generation = v, kerr.FencedInstanceID.Code, old.id, -1
		out.reply(w, resp)
	}
	fence(old.joinW, old.joining, old.joinV, false)
	fence(old.syncW, old.syncing, old.syncV, true)
	delete(cg.members, old.id)
	wasLeader := cg.leader == old.id
	m := old
	m.id, m.joining, m.syncing = id, false, false
	cg.members[id] = m
	cg.static[m.instanceID] = id
	if wasLeader {
		cg.leader = id
	}
	c.updateMember(m, j)
	m.heartbeatDeadline = now.Add(j.session)
	switch {
	case cg.state == StateStable && cg.selectProtocol() == cg.protocol:
		// As in Kafka, only a change of the group's protocol makes a
		// static rejoin rebalance; new metadata (a restarted client
		// owns nothing yet) does not.

		c.replyJoin(cg, m, out)
		out.Records = append(out.Records, c.groupRecord(g, now))
	case cg.state == StatePreparingRebalance:
		c.tryCompleteJoin(now, g, out)
	default:
		c.prepareRebalance(now, g, out)
	}
}

// prepareRebalance moves the group to PreparingRebalance: pending syncs
// are answered REBALANCE_IN_PROGRESS and members must rejoin before the
// rebalance deadline.
func (c *Coordinator) prepareRebalance(now time.Time, g *group, out *Output) {
	cg := g.classic
	if cg.state == StatePreparingRebalance {
		return
	}
	if cg.state == StateCompletingRebalance {
		for _, m := range cg.members {
			m.assignment = nil
			if m.syncing {
				resp := kmsg.NewPtrSyncGroupResponse()
				resp.Version, resp.ErrorCode = m.syncV, kerr.RebalanceInProgress.Code
				out.reply(m.syncW, resp)
				m.syncing = false
			}
		}
	}
	var timeout time.Duration
	for _, m := range cg.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	if cg.state == StateEmpty {
		cg.initialDelayCap = now.Add(timeout)
		cg.rebalanceDeadline = minTime(now.Add(c.cfg.InitialRebalanceDelay), cg.initialDelayCap)
	} else {
		cg.initialDelayCap = time.Time{}
		cg.rebalanceDeadline = now.Add(timeout)
	}
	cg.setState(StatePreparingRebalance, now)
}

// tryCompleteJoin ends PreparingRebalance once every member has rejoined
// and no KIP-394 member is pending, unless the initial delay still runs.
func (c *Coordinator) tryCompleteJoin(now time.Time, g *group, out *Output) {
	cg := g.classic
	if cg.state != StatePreparingRebalance {
		return
	}
	if !cg.initialDelayCap.IsZero() {
		return // the initial delay ends in tickClassic
	}
	for _, m := range cg.members {
		if !m.joining {
			return
		}
	}
	if len(cg.pending) > 0 {
		return
	}
	c.completeJoin(now, g, out)
}

// completeJoin starts the next generation: dynamic members that did not
// rejoin are removed, a protocol is selected and every waiting member gets
// its JoinGroup response (the leader with the member list).
func (c *Coordinator) completeJoin(now time.Time, g *group, out *Output) {
	cg := g.classic
	for _, m := range cg.members {
		if !m.joining && m.instanceID == "" {
			cg.removeMember(m)
		}
	}
	cg.initialDelayCap = time.Time{}
	cg.generation++
	if len(cg.members) == 0 {
		cg.protocol, cg.leader = "", ""
		cg.setState(StateEmpty, now)
		out.Records = append(out.Records, c.groupRecord(g, now))
		return
	}
	cg.leader = cg.leaderOrFirst()
	cg.protocol = cg.selectProtocol()
	cg.setState(StateCompletingRebalance, now)
	for _, m := range cg.members {
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		if m.joining {
			c.replyJoin(cg, m, out)
		}
	}
}

// replyJoin answers a member's waiting JoinGroup with the current
// generation.
func (c *Coordinator) replyJoin(cg *classic, m *member, out *Output) {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = m.joinV
	resp.Generation = cg.generation
	resp.ProtocolType = ptr(cg.protocolType)
	resp.Protocol = ptr(cg.protocol)
	resp.LeaderID = cg.leader
	resp.MemberID = m.id
	if m.id == cg.leader {
		for _, id := range sortedKeys(cg.members) {
			o := cg.members[id]
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			if o.instanceID != "" {
				rm.InstanceID = ptr(o.instanceID)
			}
			rm.ProtocolMetadata, _ = o.metadataFor(cg.protocol)
			resp.Members = append(resp.Members, rm)
		}
		// A leader that rejoins a Stable group (a static bounce) need
		// not assign again (v9+, KIP-814).
		resp.SkipAssignment = cg.state == StateStable
	}
	m.joining = false
	out.reply(m.joinW, resp)
}

// tickClassic runs a classic group's deadlines.
func (c *Coordinator) tickClassic(now time.Time, g *group, out *Output) {
	cg := g.classic
	for id, exp := range cg.pending {
		if !now.Before(exp) {
			delete(cg.pending, id)
		}
	}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		if m == nil || now.Before(m.heartbeatDeadline) || m.joining || m.syncing {
			continue
		}
		c.logger.Info("group: member session expired", "group", g.id, "member", m.id)
		c.removeClassicMember(now, g, m, out)
	}
	if cg.state == StatePreparingRebalance {
		if !cg.initialDelayCap.IsZero() && !now.Before(cg.rebalanceDeadline) {
			// The initial delay is over; the rest of the rebalance
			// timeout still waits for members that are not in yet.
			cg.rebalanceDeadline, cg.initialDelayCap = cg.initialDelayCap, time.Time{}
		}
		if !now.Before(cg.rebalanceDeadline) {
			c.completeJoin(now, g, out)
		} else {
			c.tryCompleteJoin(now, g, out)
		}
	}
}

// removeClassicMember takes a member out (leave or expiry) and answers
// its waiting requests with UNKNOWN_MEMBER_ID.
func (c *Coordinator) removeClassicMember(now time.Time, g *group, m *member, out *Output) {
	cg := g.classic
	if m.joining {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version, resp.ErrorCode, resp.MemberID, resp.Generation = m.joinV, kerr.UnknownMemberID.Code, m.id, -1
		out.reply(m.joinW, resp)
	}
	if m.syncing {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version, resp.ErrorCode = m.syncV, kerr.UnknownMemberID.Code
		out.reply(m.syncW, resp)
	}
	cg.removeMember(m)
	switch cg.state {
	case StateStable, StateCompletingRebalance:
		c.prepareRebalance(now, g, out)
		if len(cg.members) == 0 {
			c.completeJoin(now, g, out)
		}
	case StatePreparingRebalance:
		c.tryCompleteJoin(now, g, out)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
