// Package roundrobin is the built-in "roundrobin" assignor: Kafka's
// RoundRobinAssignor, also served under KIP-848's default name "uniform".
//
// All subscribed partitions, sorted by (topic, partition), are dealt one at
// a time to the members in a circle (static members by group.instance.id,
// then the others by member ID). A member not subscribed to a partition's
// topic is skipped for that partition; the deal goes on from the member
// after the one that took it. When every member subscribes to the same
// topics, partition counts differ by at most one across members.
//
// # uniform
//
// KIP-848 clients that do not set group.remote.assignor get the broker's
// default, which Kafka calls "uniform". Vltava answers that name with this
// same algorithm (Uniform), rather than shipping a second one: it gives the
// balance uniform promises for equal subscriptions. Kafka's uniform
// assignor is also sticky (it keeps members' owned partitions across
// rebalances) and balances unequal subscriptions better; Uniform is
// neither, so a rebalance may move more partitions than Kafka's would.
package roundrobin

import (
	"context"
	"slices"

	"github.com/vltava/vltava/plugins/assignor/internal/order"
	"github.com/vltava/vltava/plugins/sdk"
)

// Assignor is Kafka's round-robin assignor. Its zero value is ready to use.
type Assignor struct{}

// Name returns "roundrobin", the name clients select it by.
func (Assignor) Name() string { return "roundrobin" }

// Assign deals the subscribed partitions round-robin over the members,
// skipping members not subscribed to a partition's topic.
func (Assignor) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	plan := g.NewPlan()
	members := order.Members(g)
	next := 0 // the member the deal resumes at
	for _, tp := range g.Partitions() {
		// Partitions lists only topics some member subscribes to, so the
		// loop always finds a taker.
		for i := range members {
			m := &members[(next+i)%len(members)]
			if slices.Contains(m.Topics, tp.Topic) {
				plan.Assign(m.ID, tp)
				next = (next + i + 1) % len(members)
				break
			}
		}
	}
	return plan, nil
}

// Uniform is the round-robin assignor under the name "uniform", KIP-848's
// default server-side assignor (see the package doc for how it differs
// from Kafka's).
type Uniform struct{ Assignor }

// Name returns "uniform".
func (Uniform) Name() string { return "uniform" }
