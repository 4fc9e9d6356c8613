package broker

// ConsumerGroupHeartbeat v0-v1 is the KIP-848 consumer group protocol:
// members join (epoch 0), heartbeat with what they own, and get their
// assignment, computed on the broker by an assignor (Options.Assignors,
// group.consumer.assignors), revoked and granted incrementally.
//
// Version notes: v1 has the client generate its member ID and adds
// SubscribedTopicRegex (RE2, matched against whole topic names).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleConsumerGroupHeartbeat(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return reply(resp)
	}
	cl := clientOf(req)
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		var out group.Output
		resp, out = c.ConsumerGroupHeartbeat(ctx, now, cl, r)
		return out
	})
	return reply(resp)
}
