package plugintest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/plugins/sdk"
)

// Assignor runs the sdk.Assignor contract tests: on a set of groups, every
// subscribed partition is assigned exactly once, only to a member
// subscribed to its topic; nothing else is assigned; the input is not
// modified; and equal input (including the same sets in another order)
// gives an equal plan.
func Assignor(t *testing.T, a sdk.Assignor) {
	if a.Name() == "" {
		t.Errorf("Name() is empty")
	}
	for _, tc := range assignorCases() {
		t.Run(tc.name, func(t *testing.T) {
			before, in := cloneGroup(tc.g), cloneGroup(tc.g)
			plan, err := a.Assign(t.Context(), in)
			if err != nil {
				t.Fatalf("Assign: %v", err)
			}
			if plan == nil {
				t.Fatalf("Assign returned a nil plan")
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("Assign modified its input (-before +after):\n%s", diff)
			}
			for _, p := range checkPlan(tc.g, plan) {
				t.Error(p)
			}
			again, err := a.Assign(t.Context(), cloneGroup(tc.g))
			if err != nil {
				t.Fatalf("second Assign: %v", err)
			}
			if diff := cmp.Diff(normalize(plan), normalize(again)); diff != "" {
				t.Errorf("two runs on equal input differ (-first +second):\n%s", diff)
			}
			perm, err := a.Assign(t.Context(), permuteGroup(tc.g))
			if err != nil {
				t.Fatalf("Assign on reordered input: %v", err)
			}
			if diff := cmp.Diff(normalize(plan), normalize(perm)); diff != "" {
				t.Errorf("reordering members and topics changed the plan (-first +reordered):\n%s", diff)
			}
		})
	}
}

type assignorCase struct {
	name string
	g    *sdk.Group
}

func member(id string, topics ...string) sdk.Member {
	return sdk.Member{ID: id, Topics: topics}
}

func assignorCases() []assignorCase {
	topics := []sdk.Topic{{Name: "a", Partitions: 7}, {Name: "b", Partitions: 3}, {Name: "c", Partitions: 1}}
	return []assignorCase{
		{"NoMembers", &sdk.Group{ID: "g", Topics: topics}},
		{"NoTopics", &sdk.Group{ID: "g", MemberSet: []sdk.Member{member("m1", "a"), member("m2", "a")}}},
		{"NoPartitions", &sdk.Group{ID: "g", MemberSet: []sdk.Member{member("m1", "z")}, Topics: []sdk.Topic{{Name: "z"}}}},
		{"OneMember", &sdk.Group{ID: "g", MemberSet: []sdk.Member{member("m1", "a", "b")}, Topics: topics}},
		{"EqualSubscriptions", &sdk.Group{ID: "g", Topics: topics, MemberSet: []sdk.Member{
			member("m3", "a", "b", "c"), member("m1", "a", "b", "c"), member("m2", "c", "b", "a"),
		}}},
		{"MoreMembersThanPartitions", &sdk.Group{ID: "g", Topics: topics[1:], MemberSet: []sdk.Member{
			member("m1", "b"), member("m2", "b"), member("m3", "b"), member("m4", "b"), member("m5", "b"),
		}}},
		{"MixedSubscriptions", &sdk.Group{ID: "g", Topics: append(slices.Clone(topics), sdk.Topic{Name: "unwanted", Partitions: 4}), MemberSet: []sdk.Member{
			member("m1", "a"), member("m2", "a", "b"), member("m3", "c"), member("m4", "missing"),
		}}},
		{"StaticMembersWithOwnedAndRacks", &sdk.Group{ID: "g",
			Topics: []sdk.Topic{{Name: "a", Partitions: 4, Racks: [][]string{{"r1"}, {"r2"}, {"r1", "r2"}, {"r3"}}}},
			MemberSet: []sdk.Member{
				{ID: "m-b", InstanceID: "i2", Rack: "r2", Topics: []string{"a"}, Owned: []sdk.TopicPartition{{Topic: "a", Partition: 1}}, UserData: []byte{1}},
				{ID: "m-a", InstanceID: "i1", Rack: "r1", Topics: []string{"a"}, Owned: []sdk.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 9}}},
			}}},
	}
}

// checkPlan lists every way plan breaks the contract for g.
func checkPlan(g *sdk.Group, plan *sdk.Plan) []string {
	members := make(map[string]*sdk.Member)
	want := make(map[sdk.TopicPartition]bool) // subscribed partitions
	for i := range g.MemberSet {
		m := &g.MemberSet[i]
		members[m.ID] = m
		for _, tn := range m.Topics {
			for _, tp := range g.Topics {
				for p := range tp.Partitions {
					if tp.Name == tn {
						want[sdk.TopicPartition{Topic: tn, Partition: p}] = true
					}
				}
			}
		}
	}
	var problems []string
	owner := make(map[sdk.TopicPartition]string)
	for id, tps := range plan.Assignments {
		m := members[id]
		for _, tp := range tps {
			switch {
			case m == nil:
				problems = append(problems, fmt.Sprintf("%v assigned to unknown member %q", tp, id))
			case !want[tp]:
				problems = append(problems, fmt.Sprintf("%v assigned to %q but is not a subscribed partition", tp, id))
			case !slices.Contains(m.Topics, tp.Topic):
				problems = append(problems, fmt.Sprintf("%v assigned to %q, which does not subscribe to %q", tp, id, tp.Topic))
			}
			if prev, dup := owner[tp]; dup {
				problems = append(problems, fmt.Sprintf("%v assigned twice (%q and %q)", tp, prev, id))
			}
			owner[tp] = id
		}
	}
	var missing []sdk.TopicPartition
	for tp := range want {
		if _, ok := owner[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	slices.SortFunc(missing, sdk.TopicPartition.Compare)
	for _, tp := range missing {
		problems = append(problems, fmt.Sprintf("%v is subscribed but not assigned", tp))
	}
	return problems
}

// normalize returns the plan as member → sorted partitions, without
// members that got nothing.
func normalize(p *sdk.Plan) map[string][]sdk.TopicPartition {
	out := make(map[string][]sdk.TopicPartition)
	for id, tps := range p.Assignments {
		if len(tps) > 0 {
			s := slices.Clone(tps)
			slices.SortFunc(s, sdk.TopicPartition.Compare)
			out[id] = s
		}
	}
	return out
}

func cloneGroup(g *sdk.Group) *sdk.Group {
	c := *g
	c.MemberSet = make([]sdk.Member, len(g.MemberSet))
	for i, m := range g.MemberSet {
		m.Topics = slices.Clone(m.Topics)
		m.Owned = slices.Clone(m.Owned)
		m.UserData = slices.Clone(m.UserData)
		c.MemberSet[i] = m
	}
	c.Topics = make([]sdk.Topic, len(g.Topics))
	for i, tp := range g.Topics {
		if tp.Racks != nil {
			racks := make([][]string, len(tp.Racks))
			for p, r := range tp.Racks {
				racks[p] = slices.Clone(r)
			}
			tp.Racks = racks
		}
		c.Topics[i] = tp
	}
	return &c
}

// permuteGroup returns a copy with the order of every set reversed.
func permuteGroup(g *sdk.Group) *sdk.Group {
	c := cloneGroup(g)
	slices.Reverse(c.MemberSet)
	slices.Reverse(c.Topics)
	for i := range c.MemberSet {
		slices.Reverse(c.MemberSet[i].Topics)
		slices.Reverse(c.MemberSet[i].Owned)
	}
	return c
}
