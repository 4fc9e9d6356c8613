package broker

// OffsetDelete v0 deletes a group's committed offsets for some
// partitions; offsets of topics the group's members still subscribe to
// are refused (GROUP_SUBSCRIBED_TO_TOPIC). Deleted offsets become
// tombstones in __consumer_offsets before the response is sent.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleOffsetDelete(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return reply(resp)
	}
	w := newWaiter()
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.OffsetDelete(now, r, w) })
	return await(ctx, w)
}
