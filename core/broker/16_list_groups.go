package broker

// ListGroups v0-v5 lists the groups this broker coordinates (those of the
// __consumer_offsets partitions it has loaded); while a partition loads it
// answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.
//
// Version notes: v1 adds throttling; v3 is flexible; v4 filters by state
// (KIP-518) and returns each group's state; v5 filters by type, "classic"
// or "consumer" (KIP-848), and returns it. Filters are case-insensitive.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleListGroups(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ListGroupsRequest)
	var resp *kmsg.ListGroupsResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		resp = c.ListGroups(r)
		return group.Output{}
	})
	return reply(resp)
}
