package broker

// ConsumerGroupDescribe v0-v1 describes KIP-848 groups: group and
// assignment epochs, the assignor, and each member's epoch, subscription,
// current and target assignment.
//
// Version notes: v1 adds the member type (always 1, consumer).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleConsumerGroupDescribe(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ConsumerGroupDescribeRequest)
	var resp *kmsg.ConsumerGroupDescribeResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		resp = c.ConsumerGroupDescribe(r)
		return group.Output{}
	})
	return reply(resp)
}
