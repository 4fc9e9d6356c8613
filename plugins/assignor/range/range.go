// Package rangeassignor is the built-in "range" assignor: Kafka's
// RangeAssignor. The directory is plugins/assignor/range; the package is
// named rangeassignor because range is a Go keyword.
//
// Per topic, the members subscribed to it are put in order (static members
// by group.instance.id, then the others by member ID) and the topic's
// partitions are cut into contiguous ranges, one per member in that order:
// each member gets numPartitions/numMembers partitions and the first
// numPartitions%numMembers members get one more. Topics are independent,
// so members early in the order get more partitions when several topics
// do not divide evenly (Kafka's documented trade-off); use roundrobin for
// a balance across topics.
//
// Kafka 3.5's rack-aware range variant (KIP-881) is not implemented:
// sdk.Topic.Racks is ignored.
package rangeassignor

import (
	"context"
	"slices"

	"github.com/vltava/vltava/plugins/assignor/internal/order"
	"github.com/vltava/vltava/plugins/sdk"
)

// Assignor is Kafka's range assignor. Its zero value is ready to use.
type Assignor struct{}

// Name returns "range", the name clients select it by.
func (Assignor) Name() string { return "range" }

// Assign splits each subscribed topic's partitions into contiguous ranges
// over the members subscribed to it.
func (Assignor) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	plan := g.NewPlan()
	members := order.Members(g)
	parts := g.Partitions() // sorted by (topic, partition)
	for len(parts) > 0 {
		topic := parts[0].Topic
		n := 1
		for n < len(parts) && parts[n].Topic == topic {
			n++
		}
		var subs []string
		for i := range members {
			if slices.Contains(members[i].Topics, topic) {
				subs = append(subs, members[i].ID)
			}
		}
		// Partitions lists only topics some member subscribes to.
		per, extra := n/len(subs), n%len(subs)
		next := 0
		for i, id := range subs {
			size := per
			if i < extra {
				size++
			}
			if size > 0 {
				plan.Assign(id, parts[next:next+size]...)
			}
			next += size
		}
		parts = parts[n:]
	}
	return plan, nil
}
