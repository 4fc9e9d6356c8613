package sticky

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func TestContract(t *testing.T) {
	plugintest.Assignor(t, Assignor{})
}

func tp(topic string, p int32) sdk.TopicPartition {
	return sdk.TopicPartition{Topic: topic, Partition: p}
}

func member(id string, owned []sdk.TopicPartition, topics ...string) sdk.Member {
	return sdk.Member{ID: id, Topics: topics, Owned: owned}
}

func plan(t *testing.T, g *sdk.Group) map[string][]string {
	t.Helper()
	p, err := Assignor{}.Assign(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for id, tps := range p.Assignments {
		slices.SortFunc(tps, sdk.TopicPartition.Compare)
		out[id] = []string{}
		for _, x := range tps {
			out[id] = append(out[id], fmt.Sprintf("%s%d", x.Topic, x.Partition))
		}
	}
	return out
}

func TestAssign(t *testing.T) {
	topics := []sdk.Topic{{Name: "t", Partitions: 6}}
	tests := []struct {
		name    string
		members []sdk.Member
		want    map[string][]string
	}{{
		name:    "FreshGroupIsBalanced",
		members: []sdk.Member{member("a", nil, "t"), member("b", nil, "t"), member("c", nil, "t")},
		want:    map[string][]string{"a": {"t0", "t3"}, "b": {"t1", "t4"}, "c": {"t2", "t5"}},
	}, {
		// A third member joins a group of two: each old member gives up
		// only what is over its fair share, nothing is shuffled.
		name: "JoinMovesOnlyTheExcess",
		members: []sdk.Member{
			member("a", []sdk.TopicPartition{tp("t", 0), tp("t", 2), tp("t", 4)}, "t"),
			member("b", []sdk.TopicPartition{tp("t", 1), tp("t", 3), tp("t", 5)}, "t"),
			member("c", nil, "t"),
		},
		want: map[string][]string{"a": {"t0", "t2"}, "b": {"t1", "t3"}, "c": {"t4", "t5"}},
	}, {
		// A member leaves: the survivors keep theirs and split its share.
		name: "LeaveKeepsSurvivors",
		members: []sdk.Member{
			member("a", []sdk.TopicPartition{tp("t", 0), tp("t", 3)}, "t"),
			member("c", []sdk.TopicPartition{tp("t", 2), tp("t", 5)}, "t"),
		},
		want: map[string][]string{"a": {"t0", "t1", "t3"}, "c": {"t2", "t4", "t5"}},
	}, {
		// Owned partitions that are no longer valid are not kept: a topic
		// no longer subscribed, a partition that does not exist, and one
		// claimed by two members (the lower ID keeps it).
		name: "InvalidOwnershipDropped",
		members: []sdk.Member{
			member("a", []sdk.TopicPartition{tp("t", 1), tp("gone", 0), tp("t", 9)}, "t"),
			member("b", []sdk.TopicPartition{tp("t", 1), tp("t", 2)}, "t"),
		},
		// Kept: a t1, b t2; the rest alternate, a first on ties.
		want: map[string][]string{"a": {"t0", "t1", "t4"}, "b": {"t2", "t3", "t5"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := plan(t, &sdk.Group{ID: "g", MemberSet: tc.members, Topics: topics})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
