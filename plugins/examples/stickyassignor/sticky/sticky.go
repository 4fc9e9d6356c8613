// Package sticky is an example server-side assignor: members keep the
// partitions they own when that is still valid and fair, and the rest are
// dealt to the least-loaded subscribed member. Fewer partitions move on a
// rebalance than with range or roundrobin, so consumers keep their caches
// and in-flight work. The plugin binary serving it is its parent
// directory's main package.
package sticky

import (
	"context"

	"github.com/vltava/vltava/plugins/sdk"
)

// Assignor is the sticky assignor. Its zero value is ready to use.
type Assignor struct{}

// Name returns "sticky".
func (Assignor) Name() string { return "sticky" }

// Assign keeps each member's owned partitions (in partition order) while
// the member still subscribes to the topic, the partition exists, no
// member earlier in ID order kept it, and the member holds fewer than
// ceil(partitions/members). Every other partition, in order, goes to the
// subscribed member holding the fewest, the lowest member ID on a tie.
func (Assignor) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	plan := g.NewPlan()
	members, parts := g.Members(), g.Partitions()
	if len(members) == 0 {
		return plan, nil
	}
	limit := (len(parts) + len(members) - 1) / len(members)
	free := make(map[sdk.TopicPartition]bool, len(parts))
	for _, tp := range parts {
		free[tp] = true
	}
	for _, tp := range parts { // partition order, so the input order of Owned does not matter
		for i := range members {
			m := &members[i]
			if free[tp] && len(plan.Assignments[m.ID]) < limit && owns(m, tp) && m.Subscribes(tp.Topic) {
				plan.Assign(m.ID, tp)
				free[tp] = false
			}
		}
	}
	for _, tp := range parts {
		if !free[tp] {
			continue
		}
		best := ""
		for i := range members {
			m := &members[i]
			if m.Subscribes(tp.Topic) && (best == "" || len(plan.Assignments[m.ID]) < len(plan.Assignments[best])) {
				best = m.ID
			}
		}
		plan.Assign(best, tp) // Partitions lists only subscribed topics: best is set
	}
	return plan, nil
}

func owns(m *sdk.Member, tp sdk.TopicPartition) bool {
	for _, o := range m.Owned {
		if o == tp {
			return true
		}
	}
	return false
}
