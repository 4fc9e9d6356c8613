package rangeassignor

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

func TestAssign(t *testing.T) {
	m, topics := assigntest.Member, assigntest.Topics
	tests := []struct {
		name    string
		members []sdk.Member
		topics  []sdk.Topic
		want    map[string][]string
	}{{
		// RangeAssignor javadoc: "suppose there are two consumers C0 and
		// C1, two topics t0 and t1, and each topic has 3 partitions ...
		// C0: [t0p0, t0p1, t1p0, t1p1], C1: [t0p2, t1p2]".
		name:    "JavadocTwoConsumersTwoTopics",
		members: []sdk.Member{m("C1", "t0", "t1"), m("C0", "t0", "t1")},
		topics:  topics("t0", 3, "t1", 3),
		want:    map[string][]string{"C0": {"t0p0", "t0p1", "t1p0", "t1p1"}, "C1": {"t0p2", "t1p2"}},
	}, {
		// "the first few consumers will have one extra partition":
		// 10 partitions over 3 members is 4, 3, 3.
		name:    "ExtraPartitionsGoFirst",
		members: []sdk.Member{m("c", "t"), m("a", "t"), m("b", "t")},
		topics:  topics("t", 10),
		want:    map[string][]string{"a": {"tp0", "tp1", "tp2", "tp3"}, "b": {"tp4", "tp5", "tp6"}, "c": {"tp7", "tp8", "tp9"}},
	}, {
		name:    "MoreMembersThanPartitions",
		members: []sdk.Member{m("a", "t"), m("b", "t"), m("c", "t")},
		topics:  topics("t", 2),
		want:    map[string][]string{"a": {"tp0"}, "b": {"tp1"}, "c": {}},
	}, {
		// Each topic is split over its own subscribers only.
		name:    "PerTopicSubscribers",
		members: []sdk.Member{m("a", "t0"), m("b", "t0", "t1"), m("c", "t1")},
		topics:  topics("t0", 3, "t1", 4, "t2", 5),
		want:    map[string][]string{"a": {"t0p0", "t0p1"}, "b": {"t0p2", "t1p0", "t1p1"}, "c": {"t1p2", "t1p3"}},
	}, {
		// Static members sort by group.instance.id, ahead of dynamic ones.
		name: "StaticMembersFirst",
		members: []sdk.Member{
			m("a-dynamic", "t"),
			{ID: "z-member", InstanceID: "i1", Topics: []string{"t"}},
			{ID: "b-member", InstanceID: "i2", Topics: []string{"t"}},
		},
		topics: topics("t", 4),
		want:   map[string][]string{"z-member": {"tp0", "tp1"}, "b-member": {"tp2"}, "a-dynamic": {"tp3"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Assignor{}.Assign(t.Context(), &sdk.Group{ID: "g", MemberSet: tc.members, Topics: tc.topics})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, assigntest.Plan(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
