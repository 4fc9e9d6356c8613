package broker

// Heartbeat v0-v4 keeps a classic group member's session alive; during a
// rebalance the answer is REBALANCE_IN_PROGRESS, telling it to rejoin.
//
// Version notes: v1 adds throttling; v3 group.instance.id; v4 is
// flexible.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleHeartbeat(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.HeartbeatRequest)
	var resp *kmsg.HeartbeatResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		resp = c.Heartbeat(now, r)
		return group.Output{}
	})
	return reply(resp)
}
