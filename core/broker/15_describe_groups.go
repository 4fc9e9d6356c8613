package broker

// DescribeGroups v0-v6 describes groups: state, protocol and members.
//
// Version notes: v1 adds throttling; v3 authorized operations (not
// computed: reported as unset); v4 instance IDs; v5 is flexible; v6 an
// error message and GROUP_ID_NOT_FOUND for unknown groups (KIP-1043;
// before v6 an unknown group is Dead without an error).
//
// A group without members (only offsets, or every member gone) is Empty
// with no members, not an error. KIP-848 groups are described too, with
// protocol type "consumer" and their assignor as the protocol. Each group
// whose __consumer_offsets partition is loading here answers
// COORDINATOR_LOAD_IN_PROGRESS, one not led here NOT_COORDINATOR.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleDescribeGroups(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	var resp *kmsg.DescribeGroupsResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		resp = c.DescribeGroups(r)
		return group.Output{}
	})
	return reply(resp)
}
