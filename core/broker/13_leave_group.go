package broker

// LeaveGroup v0-v5 takes members out of a classic group, which then
// rebalances.
//
// Version notes: v1 adds throttling; v3 leaves a batch of members, each by
// member ID or group.instance.id (KIP-345); v4 is flexible; v5 adds a
// reason per member.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleLeaveGroup(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.LeaveGroupRequest)
	var resp *kmsg.LeaveGroupResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		var out group.Output
		resp, out = c.LeaveGroup(now, r)
		return out
	})
	return reply(resp)
}
