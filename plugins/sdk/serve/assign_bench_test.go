package serve

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// The Assign benchmarks split the out-of-process assignor round trip into
// its parts for the 1,000-partition × 100-member group of the host's
// benchmark (plugins/host BenchmarkAssign1000Partitions100Members):
//
//	go test ./plugins/sdk/serve -run '^$' -bench 'Assign' -benchmem
//
// request/response: the conversion to and from the wire messages plus the
// protobuf encoding, both directions (what the host and the plugin do per
// call besides computing). shim: a whole gRPC call through go-plugin's
// in-process harness to an assignor that returns a precomputed plan (no
// child process, no assignment work).

// benchGroup has 100 members subscribed to 10 topics of 100 partitions.
func benchGroup() *sdk.Group {
	g := &sdk.Group{ID: "bench"}
	var topics []string
	for i := range 10 {
		name := fmt.Sprintf("topic-%d", i)
		topics = append(topics, name)
		g.Topics = append(g.Topics, sdk.Topic{Name: name, Partitions: 100})
	}
	for i := range 100 {
		g.MemberSet = append(g.MemberSet, sdk.Member{ID: fmt.Sprintf("member-%03d", i), Topics: topics})
	}
	return g
}

// benchPlan is the range assignor's plan for benchGroup: member i gets
// partition i of every topic.
func benchPlan(g *sdk.Group) *sdk.Plan {
	p := g.NewPlan()
	for i, m := range g.MemberSet {
		for _, t := range g.Topics {
			p.Assign(m.ID, sdk.TopicPartition{Topic: t.Name, Partition: int32(i)})
		}
	}
	return p
}

func BenchmarkAssignRequestCodec(b *testing.B) {
	g := benchGroup()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		buf, err := proto.Marshal(groupToPB(g))
		if err != nil {
			b.Fatal(err)
		}
		size = len(buf)
		var req pluginpb.AssignRequest
		if err := proto.Unmarshal(buf, &req); err != nil {
			b.Fatal(err)
		}
		if got, err := groupFromPB(&req); err != nil || len(got.MemberSet) != 100 {
			b.Fatal("lost members")
		}
	}
	b.ReportMetric(float64(size), "wire-bytes")
}

func BenchmarkAssignResponseCodec(b *testing.B) {
	plan := benchPlan(benchGroup())
	b.ReportAllocs()
	var size int
	for b.Loop() {
		buf, err := proto.Marshal(planToPB(plan))
		if err != nil {
			b.Fatal(err)
		}
		size = len(buf)
		var resp pluginpb.AssignResponse
		if err := proto.Unmarshal(buf, &resp); err != nil {
			b.Fatal(err)
		}
		if got, err := planFromPB(&resp); err != nil || len(got.Assignments) != 100 {
			b.Fatal("lost members")
		}
	}
	b.ReportMetric(float64(size), "wire-bytes")
}

func BenchmarkAssignShim(b *testing.B) {
	g := benchGroup()
	plan := benchPlan(g)
	a := assignorThroughShim(b, assignFunc(func(*sdk.Group) (*sdk.Plan, error) { return plan, nil }))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Assign(ctx, g); err != nil {
			b.Fatal(err)
		}
	}
}
