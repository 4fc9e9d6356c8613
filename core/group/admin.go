package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// authorizedOpsUnset is Kafka's value when operations were not asked for.
const authorizedOpsUnset = -2147483648

// DescribeGroups handles DescribeGroups. A group with no members (only
// offsets, or all members gone) describes as Empty with no members. An
// unknown group is Dead with no error before v6 and GROUP_ID_NOT_FOUND
// from v6 (KIP-1043), as in Kafka.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		dg.AuthorizedOperations = authorizedOpsUnset
		g := c.groups[id]
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case c.coordinatorError(id) != 0:
			dg.ErrorCode = c.coordinatorError(id)
		case g == nil:
			dg.State = StateDead
			if req.Version >= 6 {
				dg.ErrorCode = kerr.GroupIDNotFound.Code
				msg := fmt.Sprintf("group %s not found", id)
				dg.ErrorMessage = &msg
			}
		case g.consumer != nil:
			c.describeConsumerAsClassic(g, &dg)
		default:
			cg := g.classic
			dg.State, dg.ProtocolType = cg.state, cg.protocolType
			if cg.state == StateStable || cg.state == StateCompletingRebalance {
				dg.Protocol = cg.protocol
			}
			for _, mid := range sortedKeys(cg.members) {
				m := cg.members[mid]
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
				if m.instanceID != "" {
					dm.InstanceID = ptr(m.instanceID)
				}
				if cg.state == StateStable {
					dm.ProtocolMetadata, _ = m.metadataFor(cg.protocol)
					dm.MemberAssignment = m.assignment
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeConsumerAsClassic describes a KIP-848 group in DescribeGroups'
// terms: protocol type "consumer", the assignor as protocol, and each
// member's subscription and assignment in the consumer protocol's
// encoding, so classic tools can show it.
func (c *Coordinator) describeConsumerAsClassic(g *group, dg *kmsg.DescribeGroupsResponseGroup) {
	cg := g.consumer
	dg.State, dg.ProtocolType, dg.Protocol = cg.state(), "consumer", cg.assignor
	for _, mid := range sortedKeys(cg.members) {
		m := cg.members[mid]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			dm.InstanceID = ptr(m.instanceID)
		}
		md := kmsg.NewConsumerMemberMetadata()
		md.Version = 0
		md.Topics = slices.Sorted(maps.Keys(m.subscribed))
		dm.ProtocolMetadata = md.AppendTo(nil)
		as := kmsg.NewConsumerMemberAssignment()
		for _, t := range c.describeAssignment(m.assigned).TopicPartitions {
			as.Topics = append(as.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		dm.MemberAssignment = as.AppendTo(nil)
		dg.Members = append(dg.Members, dm)
	}
}

// ConsumerGroupDescribe handles ConsumerGroupDescribe (KIP-848 groups).
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		g := c.groups[id]
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case c.coordinatorError(id) != 0:
			dg.ErrorCode = c.coordinatorError(id)
		case g == nil:
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("group %s not found", id)
			dg.ErrorMessage = &msg
		case g.consumer == nil && !g.empty():
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("group %s is not a consumer group", id)
			dg.ErrorMessage = &msg
		case g.consumer == nil:
			dg.State = StateEmpty
		default:
			cg := g.consumer
			dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cg.state(), cg.epoch, cg.assignmentEpoch, cg.assignor
			for _, mid := range sortedKeys(cg.members) {
				m := cg.members[mid]
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
				if m.instanceID != "" {
					dm.InstanceID = ptr(m.instanceID)
				}
				if m.rack != "" {
					dm.RackID = ptr(m.rack)
				}
				dm.SubscribedTopics = slices.Clone(m.names)
				if m.regex != "" {
					dm.SubscribedTopicRegex = ptr(m.regex)
				}
				dm.Assignment = c.describeAssignment(m.assigned)
				dm.TargetAssignment = c.describeAssignment(cg.target[m.id])
				dm.MemberType = 1
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// ListGroups handles ListGroups with its state (v4+) and type (v5+)
// filters, both case-insensitive: the groups of the partitions loaded
// here, or COORDINATOR_LOAD_IN_PROGRESS while any partition loads.
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if c.loadingAny() {
		// As Kafka: the list would miss the loading partitions' groups.
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		return slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		if !match(req.StatesFilter, g.state()) || !match(req.TypesFilter, g.typ()) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.protocolType(), g.state(), g.typ()
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DeleteGroups handles DeleteGroups: only a group without members can be
// deleted (NON_EMPTY_GROUP otherwise); its metadata and every offset get
// tombstones (a durable reply).
func (c *Coordinator) DeleteGroups(now time.Time, req *kmsg.DeleteGroupsRequest, w Waiter) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	out.Replies = append(out.Replies, Reply{To: w, Resp: resp, Durable: true})
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		g := c.groups[id]
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case c.coordinatorError(id) != 0:
			dg.ErrorCode = c.coordinatorError(id)
		case g == nil:
			dg.ErrorCode = kerr.GroupIDNotFound.Code
		case !g.empty():
			dg.ErrorCode = kerr.NonEmptyGroup.Code
			msg := fmt.Sprintf("group %s has active members; stop them (or wait for their sessions to expire) first", id)
			dg.ErrorMessage = &msg
		default:
			for _, t := range sortedTPs(g.offsets) {
				out.Records = append(out.Records, c.offsetTombstone(id, t))
			}
			c.tombstoneGroup(g, &out)
			if g.classic != nil {
				g.classic.setState(StateDead, now)
			}
			delete(c.groups, id)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return out
}

func sortedTPs(m map[tp]offset) []tp {
	ts := slices.Collect(maps.Keys(m))
	slices.SortFunc(ts, func(a, b tp) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	return ts
}

// tombstoneGroup adds the tombstones that delete a group's metadata: its
// KIP-848 records if it has any, and the classic group record.
func (c *Coordinator) tombstoneGroup(g *group, out *Output) {
	if g.consumer != nil {
		c.tombstoneConsumer(g, g.consumer, out)
	}
	out.Records = append(out.Records, c.groupTombstone(g.id))
}
