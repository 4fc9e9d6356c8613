package serve

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

func TestAssignCodecRoundTrip(t *testing.T) {
	g := benchGroup()
	g.MemberSet[3].InstanceID = "i3"
	g.MemberSet[4].Rack = "r4"
	g.MemberSet[5].UserData = []byte{5}
	g.MemberSet[6].Topics = []string{"topic-1", "unknown"}
	g.MemberSet[7].Owned = []sdk.TopicPartition{{Topic: "gone", Partition: 7}, {Topic: "topic-1", Partition: 3}, {Topic: "topic-1", Partition: 1}}
	got, err := groupFromPB(groupToPB(g))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(g, got); d != "" {
		t.Errorf("group changed crossing the wire (-sent +got):\n%s", d)
	}
	if n := len(groupToPB(g).Subscriptions); n != 2 {
		t.Errorf("%d subscriptions sent for 2 distinct topic lists", n)
	}
	plan := benchPlan(g)
	plan.Assignments["member-000"] = nil
	back, err := planFromPB(planToPB(plan))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(plan, back); d != "" {
		t.Errorf("plan changed crossing the wire (-sent +got):\n%s", d)
	}
}

func TestAssignCodecRejectsMalformed(t *testing.T) {
	plans := []*pluginpb.AssignResponse{
		{MemberIds: []string{"a"}}, // no lengths
		{MemberIds: []string{"a"}, Lengths: []int32{3}, Partitions: []int32{0, 1, 0}},                             // topic index past the table
		{TopicNames: []string{"t"}, MemberIds: []string{"a"}, Lengths: []int32{3}, Partitions: []int32{0, 5, 0}},  // run past the end
		{TopicNames: []string{"t"}, MemberIds: []string{"a"}, Lengths: []int32{4}, Partitions: []int32{0, 1, 0}},  // length past the end
		{TopicNames: []string{"t"}, MemberIds: []string{"a"}, Lengths: []int32{-1}, Partitions: []int32{0, 1, 0}}, // negative length
		{TopicNames: []string{"t"}, MemberIds: []string{"a"}, Lengths: []int32{2}, Partitions: []int32{0, 0, 7}},  // values left over
		{TopicNames: []string{"t"}, MemberIds: []string{"a"}, Lengths: []int32{2}, Partitions: []int32{0}},        // truncated run
		{TopicNames: []string{"t"}, MemberIds: []string{"a", "a"}, Lengths: []int32{0, 0}},                        // a member twice
	}
	for i, p := range plans {
		if _, err := planFromPB(p); !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("plan %d: err = %v, want sdk.ErrInvalidArgument", i, err)
		}
	}
	groups := []*pluginpb.AssignRequest{
		{MemberIds: []string{"a"}},                                  // no subscription column
		{MemberIds: []string{"a"}, MemberSubscriptions: []int32{0}}, // subscription past the table
		{MemberIds: []string{"a"}, MemberSubscriptions: []int32{0}, Subscriptions: []*pluginpb.Subscription{{Topics: []int32{2}}}}, // topic past the table
		{MemberIds: []string{"a"}, MemberSubscriptions: []int32{0}, Subscriptions: []*pluginpb.Subscription{{}}, Racks: []string{"r", "s"}},
		{MemberIds: []string{"a"}, MemberSubscriptions: []int32{0}, Subscriptions: []*pluginpb.Subscription{{}}, Owned: []int32{0, 0}},
		{Topics: []*pluginpb.Topic{{Name: 1}}, TopicNames: []string{"t"}},
	}
	for i, g := range groups {
		if _, err := groupFromPB(g); !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("group %d: err = %v, want sdk.ErrInvalidArgument", i, err)
		}
	}
}

// FuzzAssignResponse: any bytes a plugin sends decode to a plan or an
// error, never a panic, and a decoded plan survives a round trip.
func FuzzAssignResponse(f *testing.F) {
	for _, p := range []*sdk.Plan{benchPlan(benchGroup()), {Assignments: map[string][]sdk.TopicPartition{"m": {{Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}}}} {
		buf, err := proto.Marshal(planToPB(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf)
	}
	f.Add([]byte{0x1a, 0x02, 0x05, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var resp pluginpb.AssignResponse
		if proto.Unmarshal(data, &resp) != nil {
			return
		}
		plan, err := planFromPB(&resp)
		if err != nil {
			return
		}
		back, err := planFromPB(planToPB(plan))
		if err != nil || fmt.Sprint(back) != fmt.Sprint(plan) {
			t.Fatalf("round trip: %v, %v != %v", err, back, plan)
		}
	})
}

// FuzzAssignRequest: any bytes the host sends decode to a group or an
// error, never a panic.
func FuzzAssignRequest(f *testing.F) {
	g := benchGroup()
	g.MemberSet[1].Owned = []sdk.TopicPartition{{Topic: "topic-1", Partition: 1}}
	g.MemberSet[2].InstanceID = "i"
	buf, err := proto.Marshal(groupToPB(g))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(buf)
	f.Add([]byte{0x2a, 0x01, 0x61, 0x42, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req pluginpb.AssignRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		g, err := groupFromPB(&req)
		if err != nil {
			return
		}
		if _, err := groupFromPB(groupToPB(g)); err != nil {
			t.Fatalf("re-encoded group rejected: %v", err)
		}
	})
}
