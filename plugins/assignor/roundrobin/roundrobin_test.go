package roundrobin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/plugins/assignor/internal/assigntest"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func TestContract(t *testing.T) {
	plugintest.Assignor(t, Assignor{})
}

func TestContractUniform(t *testing.T) {
	plugintest.Assignor(t, Uniform{})
}

func TestAssign(t *testing.T) {
	m, topics := assigntest.Member, assigntest.Topics
	tests := []struct {
		name    string
		members []sdk.Member
		topics  []sdk.Topic
		want    map[string][]string
	}{{
		// RoundRobinAssignor javadoc: "suppose there are two consumers C0
		// and C1, two topics t0 and t1, and each topic has 3 partitions ...
		// C0: [t0p0, t0p2, t1p1], C1: [t0p1, t1p0, t1p2]".
		name:    "JavadocIdenticalSubscriptions",
		members: []sdk.Member{m("C1", "t0", "t1"), m("C0", "t0", "t1")},
		topics:  topics("t0", 3, "t1", 3),
		want:    map[string][]string{"C0": {"t0p0", "t0p2", "t1p1"}, "C1": {"t0p1", "t1p0", "t1p2"}},
	}, {
		// RoundRobinAssignor javadoc: "three consumers C0, C1, C2, and three
		// topics t0, t1, t2, with 1, 2, and 3 partitions, respectively ...
		// C0 is subscribed to t0; C1 is subscribed to t0, t1; and C2 is
		// subscribed to t0, t1, t2 ... C0: [t0p0], C1: [t1p0],
		// C2: [t1p1, t2p0, t2p1, t2p2]".
		name:    "JavadocUnequalSubscriptions",
		members: []sdk.Member{m("C2", "t0", "t1", "t2"), m("C0", "t0"), m("C1", "t0", "t1")},
		topics:  topics("t0", 1, "t1", 2, "t2", 3),
		want:    map[string][]string{"C0": {"t0p0"}, "C1": {"t1p0"}, "C2": {"t1p1", "t2p0", "t2p1", "t2p2"}},
	}, {
		// The deal continues across topics: 3 + 2 partitions over 2 members.
		name:    "AcrossTopics",
		members: []sdk.Member{m("a", "x", "y"), m("b", "x", "y")},
		topics:  topics("x", 3, "y", 2),
		want:    map[string][]string{"a": {"xp0", "xp2", "yp1"}, "b": {"xp1", "yp0"}},
	}, {
		name: "StaticMembersFirst",
		members: []sdk.Member{
			m("a-dynamic", "t"),
			{ID: "z-member", InstanceID: "i1", Topics: []string{"t"}},
			{ID: "b-member", InstanceID: "i2", Topics: []string{"t"}},
		},
		topics: topics("t", 4),
		want:   map[string][]string{"z-member": {"tp0", "tp3"}, "b-member": {"tp1"}, "a-dynamic": {"tp2"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range []sdk.Assignor{Assignor{}, Uniform{}} {
				plan, err := a.Assign(t.Context(), &sdk.Group{ID: "g", MemberSet: tc.members, Topics: tc.topics})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, assigntest.Plan(plan)); diff != "" {
					t.Errorf("%s plan (-want +got):\n%s", a.Name(), diff)
				}
			}
		})
	}
}

// TestBalancedForEqualSubscriptions checks the property uniform promises:
// with equal subscriptions, counts differ by at most one.
func TestBalancedForEqualSubscriptions(t *testing.T) {
	var members []sdk.Member
	for _, id := range []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7"} {
		members = append(members, assigntest.Member(id, "a", "b", "c"))
	}
	plan, err := Uniform{}.Assign(t.Context(), &sdk.Group{MemberSet: members, Topics: assigntest.Topics("a", 10, "b", 7, "c", 13)})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 1<<30, 0
	for _, tps := range plan.Assignments {
		lo, hi = min(lo, len(tps)), max(hi, len(tps))
	}
	if hi-lo > 1 {
		t.Errorf("30 partitions over 7 members: counts range %d..%d, want a spread of at most 1", lo, hi)
	}
}
