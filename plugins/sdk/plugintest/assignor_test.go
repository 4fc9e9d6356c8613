package plugintest

import (
	"context"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
)

// roundRobin deals the partitions, in (topic, partition) order, to the
// members subscribed to each topic, in member ID order.
type roundRobin struct{}

func (roundRobin) Name() string { return "roundrobin" }

func (roundRobin) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	plan := g.NewPlan()
	members := g.Members()
	next := 0
	for _, tp := range g.Partitions() {
		for i := range members {
			m := &members[(next+i)%len(members)]
			if m.Subscribes(tp.Topic) {
				plan.Assign(m.ID, tp)
				next = (next + i + 1) % len(members)
				break
			}
		}
	}
	return plan, nil
}

func TestAssignorRoundRobin(t *testing.T) {
	Assignor(t, roundRobin{})
}

// TestCheckPlanCatchesBrokenPlans makes sure the contract checker is not
// vacuous: each broken plan must be reported.
func TestCheckPlanCatchesBrokenPlans(t *testing.T) {
	g := &sdk.Group{
		MemberSet: []sdk.Member{member("m1", "a"), member("m2", "a", "b")},
		Topics:    []sdk.Topic{{Name: "a", Partitions: 2}, {Name: "b", Partitions: 1}, {Name: "x", Partitions: 1}},
	}
	tp := func(topic string, p int32) sdk.TopicPartition { return sdk.TopicPartition{Topic: topic, Partition: p} }
	good := map[string][]sdk.TopicPartition{"m1": {tp("a", 0)}, "m2": {tp("a", 1), tp("b", 0)}}
	if p := checkPlan(g, &sdk.Plan{Assignments: good}); len(p) != 0 {
		t.Fatalf("valid plan reported: %v", p)
	}
	for name, bad := range map[string]map[string][]sdk.TopicPartition{
		"missing":        {"m1": {tp("a", 0)}, "m2": {tp("a", 1)}},
		"twice":          {"m1": {tp("a", 0), tp("a", 1)}, "m2": {tp("a", 1), tp("b", 0)}},
		"not subscribed": {"m1": {tp("a", 0), tp("b", 0)}, "m2": {tp("a", 1)}},
		"unknown member": {"m1": {tp("a", 0)}, "m2": {tp("a", 1)}, "m9": {tp("b", 0)}},
		"no such part":   {"m1": {tp("a", 0), tp("a", 5)}, "m2": {tp("a", 1), tp("b", 0)}},
		"unsubscribed":   {"m1": {tp("a", 0)}, "m2": {tp("a", 1), tp("b", 0), tp("x", 0)}},
	} {
		if p := checkPlan(g, &sdk.Plan{Assignments: bad}); len(p) == 0 {
			t.Errorf("%s: broken plan not reported", name)
		}
	}
}
