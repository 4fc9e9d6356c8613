package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func tp(topic string, p int32) sdk.TopicPartition {
	return sdk.TopicPartition{Topic: topic, Partition: p}
}

func TestGroupHelpers(t *testing.T) {
	g := &sdk.Group{
		MemberSet: []sdk.Member{{ID: "m2", Topics: []string{"b"}}, {ID: "m10", Topics: []string{"a", "b"}}, {ID: "m1", Topics: []string{"a"}}},
		Topics:    []sdk.Topic{{Name: "b", Partitions: 2}, {Name: "unsubscribed", Partitions: 3}, {Name: "a", Partitions: 1}, {Name: "empty"}},
	}
	var ids []string
	for _, m := range g.Members() {
		ids = append(ids, m.ID)
	}
	if want := []string{"m1", "m10", "m2"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("Members() IDs = %v, want %v", ids, want)
	}
	if g.MemberSet[0].ID != "m2" {
		t.Errorf("Members() reordered the group's own slice")
	}
	if got, want := g.Partitions(), []sdk.TopicPartition{tp("a", 0), tp("b", 0), tp("b", 1)}; !reflect.DeepEqual(got, want) {
		t.Errorf("Partitions() = %v, want %v", got, want)
	}
	plan := g.NewPlan()
	if len(plan.Assignments) != 3 {
		t.Fatalf("NewPlan has %d members, want 3", len(plan.Assignments))
	}
	plan.Assign("m1", tp("a", 0))
	plan.Assign("m1", tp("b", 1))
	if got := plan.Assignments["m1"]; !reflect.DeepEqual(got, []sdk.TopicPartition{tp("a", 0), tp("b", 1)}) {
		t.Errorf("after two Assigns m1 has %v", got)
	}
	var zero sdk.Plan
	zero.Assign("x", tp("a", 0)) // the zero Plan is usable
	if len(zero.Assignments["x"]) != 1 {
		t.Errorf("Assign on a zero Plan lost the partition")
	}
}

func TestAuthenticationError(t *testing.T) {
	var err error = fmt.Errorf("plain: %w", &sdk.AuthenticationError{Message: "bad credentials"})
	if !errors.Is(err, sdk.ErrAuthenticationFailed) {
		t.Errorf("errors.Is(%v, ErrAuthenticationFailed) = false", err)
	}
	var ae *sdk.AuthenticationError
	if !errors.As(err, &ae) || ae.Message != "bad credentials" {
		t.Errorf("errors.As lost the message: %v", ae)
	}
	if errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("an authentication failure matched ErrUnavailable")
	}
}

func TestPrincipalString(t *testing.T) {
	if got := sdk.Anonymous.String(); got != "User:ANONYMOUS" {
		t.Errorf("Anonymous.String() = %q", got)
	}
}

// modAssignor is the package documentation's example.
type modAssignor struct{}

func (modAssignor) Name() string { return "mod" }

func (modAssignor) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	plan := g.NewPlan()
	members := g.Members()
	for _, tp := range g.Partitions() {
		var subs []string
		for _, m := range members {
			if m.Subscribes(tp.Topic) {
				subs = append(subs, m.ID)
			}
		}
		plan.Assign(subs[int(tp.Partition)%len(subs)], tp)
	}
	return plan, nil
}

func Example_assignor() {
	g := &sdk.Group{
		MemberSet: []sdk.Member{{ID: "b", Topics: []string{"orders"}}, {ID: "a", Topics: []string{"orders"}}},
		Topics:    []sdk.Topic{{Name: "orders", Partitions: 3}},
	}
	plan, _ := modAssignor{}.Assign(context.Background(), g)
	fmt.Println("a:", plan.Assignments["a"])
	fmt.Println("b:", plan.Assignments["b"])
	// Output:
	// a: [{orders 0} {orders 2}]
	// b: [{orders 1}]
}

func TestModAssignorContract(t *testing.T) {
	plugintest.Assignor(t, modAssignor{})
}
