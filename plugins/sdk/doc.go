// Package sdk holds the contracts between the Vltava broker and its
// plugins: MetadataStore (the cluster's source of truth), Assignor
// (server-side consumer group assignment) and Authenticator (SASL), plus
// the value types they exchange (Principal, Group, Plan, ...).
//
// The package imports the standard library only, so a third-party plugin
// stays light. Every method takes a context.Context and a request struct
// and returns a response struct, so fields can be added without breaking
// implementations. The broker (core/) depends on these interfaces alone: a
// program embedding the broker hands in plain Go values, the daemon hands
// in gRPC clients of plugin processes. Package plugintest holds contract
// tests any implementation can run against itself.
//
// Errors are sentinels ("sdk: ...") checked with errors.Is; see ErrNotFound
// and its neighbours.
//
// # Writing an assignor
//
// The Group helpers keep a custom assignor to a page. This one gives
// partition p to member p mod len(members) among the members subscribed to
// the partition's topic:
//
//	type modAssignor struct{}
//
//	func (modAssignor) Name() string { return "mod" }
//
//	func (modAssignor) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
//		plan := g.NewPlan()
//		members := g.Members() // sorted by member ID
//		for _, tp := range g.Partitions() { // sorted by (topic, partition)
//			var subs []string
//			for _, m := range members {
//				if m.Subscribes(tp.Topic) {
//					subs = append(subs, m.ID)
//				}
//			}
//			plan.Assign(subs[int(tp.Partition)%len(subs)], tp)
//		}
//		return plan, nil
//	}
//
// Partitions lists only topics some member subscribes to, so subs is
// never empty. Run plugintest.Assignor against it in a test, then serve it
// from main.
package sdk
