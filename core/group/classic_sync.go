package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// SyncGroup handles a classic SyncGroup. The leader's sync stores the
// assignment (a durable reply) and answers every waiting member; other
// members wait for it.
func (c *Coordinator) SyncGroup(now time.Time, req *kmsg.SyncGroupRequest, w Waiter) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) Output {
		resp.ErrorCode = code
		out.reply(w, resp)
		return out
	}
	g := c.groups[req.Group]
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID.Code)
	case c.coordinatorError(req.Group) != 0:
		return fail(c.coordinatorError(req.Group))
	case g == nil || g.consumer != nil:
		return fail(kerr.UnknownMemberID.Code)
	}
	cg := g.classic
	if cg.state == StateDead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	m, err := cg.checkMember(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
		return fail(err.Code)
	case req.Generation != cg.generation:
		return fail(kerr.IllegalGeneration.Code)
	case req.ProtocolType != nil && *req.ProtocolType != cg.protocolType,
		req.Protocol != nil && *req.Protocol != cg.protocol:
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	m.heartbeatDeadline = now.Add(m.sessionTimeout)
	switch cg.state {
	case StatePreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case StateStable:
		c.replySync(cg, m, w, req.Version, &out, false)
		return out
	case StateCompletingRebalance:
		m.syncW, m.syncV, m.syncing = w, req.Version, true
		if m.id != cg.leader {
			return out
		}
		byID := map[string][]byte{}
		for _, a := range req.GroupAssignment {
			byID[a.MemberID] = a.MemberAssignment
		}
		for _, o := range cg.members {
			o.assignment = byID[o.id]
		}
		cg.setState(StateStable, now)
		out.Records = append(out.Records, c.groupRecord(g, now))
		for _, id := range sortedKeys(cg.members) {
			if o := cg.members[id]; o.syncing {
				c.replySync(cg, o, o.syncW, o.syncV, &out, true)
			}
		}
		return out
	}
	return fail(kerr.UnknownMemberID.Code)
}

func (c *Coordinator) replySync(cg *classic, m *member, w Waiter, v int16, out *Output, durable bool) {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = v
	resp.ProtocolType, resp.Protocol = ptr(cg.protocolType), ptr(cg.protocol)
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	m.syncing = false
	out.Replies = append(out.Replies, Reply{To: w, Resp: resp, Durable: durable})
}

// Heartbeat handles a classic Heartbeat: it keeps the member's session
// alive and tells it when to rejoin.
func (c *Coordinator) Heartbeat(now time.Time, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g := c.groups[req.Group]
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	case c.coordinatorError(req.Group) != 0:
		resp.ErrorCode = c.coordinatorError(req.Group)
		return resp
	case g == nil || g.consumer != nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	cg := g.classic
	m, err := cg.checkMember(req.MemberID, req.InstanceID)
	switch {
	case cg.state == StateDead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case err != nil:
		resp.ErrorCode = err.Code
	case req.Generation != cg.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	default:
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		if cg.state == StatePreparingRebalance {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
	}
	return resp
}

// LeaveGroup handles a classic LeaveGroup: one member (v0-v2) or a batch
// identified by member or instance ID (v3+, KIP-345).
// Other members' requests completed by the leave are in the Output.
func (c *Coordinator) LeaveGroup(now time.Time, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, Output) {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := c.groups[req.Group]
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, out
	case c.coordinatorError(req.Group) != 0:
		resp.ErrorCode = c.coordinatorError(req.Group)
		return resp, out
	case g == nil || g.consumer != nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, out
	case g.classic.state == StateDead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, out
	}
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		code := c.leaveOne(now, g, lm, &out)
		rm.ErrorCode = code
		resp.Members = append(resp.Members, rm)
		if req.Version < 3 {
			resp.ErrorCode = code
		}
	}
	return resp, out
}

func (c *Coordinator) leaveOne(now time.Time, g *group, lm kmsg.LeaveGroupRequestMember, out *Output) int16 {
	cg := g.classic
	id := lm.MemberID
	if lm.InstanceID != nil && *lm.InstanceID != "" {
		owner, ok := cg.static[*lm.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case id != "" && id != owner:
			return kerr.FencedInstanceID.Code
		}
		id = owner
	}
	if _, ok := cg.pending[id]; ok {
		delete(cg.pending, id)
		c.tryCompleteJoin(now, g, out)
		return 0
	}
	m := cg.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.logger.Debug("group: member left", "group", g.id, "member", id)
	c.removeClassicMember(now, g, m, out)
	return 0
}
