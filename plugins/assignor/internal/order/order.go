// Package order holds the member order Kafka's client-side assignors use,
// shared by the built-in assignors so range and roundrobin agree on it.
package order

import (
	"cmp"
	"slices"

	"github.com/vltava/vltava/plugins/sdk"
)

// Members returns g's members in Kafka's assignor order (the MemberInfo
// order of Kafka's AbstractPartitionAssignor): static members (with a
// group.instance.id) first, sorted by instance ID, then dynamic members
// sorted by member ID. Static members keep their place when they rejoin
// with a new member ID, which keeps their partitions. Ties (two members
// claiming one instance ID) break by member ID so the order is total.
func Members(g *sdk.Group) []sdk.Member {
	ms := g.Members() // sorted by member ID
	slices.SortStableFunc(ms, func(a, b sdk.Member) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return cmp.Compare(a.InstanceID, b.InstanceID)
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return 0
	})
	return ms
}
