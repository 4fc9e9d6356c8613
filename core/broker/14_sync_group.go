package broker

// SyncGroup v0-v5 hands each classic group member the assignment its
// leader computed; members wait for the leader's sync.
//
// Version notes: v1 adds throttling; v3 group.instance.id; v4 is
// flexible; v5 adds the protocol type and name, checked against the
// group's (INCONSISTENT_GROUP_PROTOCOL).
//
// The leader's assignment is written to __consumer_offsets before any
// member gets its response.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleSyncGroup(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.SyncGroupRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return reply(resp)
	}
	w := newWaiter()
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.SyncGroup(now, r, w) })
	return await(ctx, w)
}
