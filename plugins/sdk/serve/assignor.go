package serve

import (
	"context"
	"slices"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

type assignorServer struct {
	pluginpb.UnimplementedAssignorServer
	impl sdk.Assignor
}

func (s *assignorServer) Assign(ctx context.Context, req *pluginpb.AssignRequest) (*pluginpb.AssignResponse, error) {
	plan, err := s.impl.Assign(ctx, groupFromPB(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return planToPB(plan), nil
}

// NewAssignorClient returns an sdk.Assignor that calls the plugin behind
// c. name is the assignor's Name, read once with ReadInfo when the plugin
// started (Name cannot fail or block).
func NewAssignorClient(name string, c Conn) sdk.Assignor {
	return &assignorClient{name: name, c: c}
}

type assignorClient struct {
	name string
	c    Conn
}

func (a *assignorClient) Name() string { return a.name }

func (a *assignorClient) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	cc, err := a.c.Conn()
	if err != nil {
		return nil, err
	}
	resp, err := pluginpb.NewAssignorClient(cc).Assign(ctx, groupToPB(g))
	if err != nil {
		return nil, fromStatus(ctx, a.c, err)
	}
	return planFromPB(resp), nil
}

func groupToPB(g *sdk.Group) *pluginpb.AssignRequest {
	req := &pluginpb.AssignRequest{GroupId: g.ID}
	for i := range g.MemberSet {
		m := &g.MemberSet[i]
		req.Members = append(req.Members, &pluginpb.Member{
			Id: m.ID, InstanceId: m.InstanceID, Rack: m.Rack,
			Topics: m.Topics, Owned: tpsToPB(m.Owned), UserData: m.UserData,
		})
	}
	for _, t := range g.Topics {
		pt := &pluginpb.Topic{Name: t.Name, Partitions: t.Partitions, HasRacks: t.Racks != nil}
		for _, r := range t.Racks {
			pt.Racks = append(pt.Racks, &pluginpb.PartitionRacks{Racks: r})
		}
		req.Topics = append(req.Topics, pt)
	}
	return req
}

func groupFromPB(req *pluginpb.AssignRequest) *sdk.Group {
	g := &sdk.Group{ID: req.GroupId, MemberSet: make([]sdk.Member, 0, len(req.Members))}
	for _, m := range req.Members {
		g.MemberSet = append(g.MemberSet, sdk.Member{
			ID: m.Id, InstanceID: m.InstanceId, Rack: m.Rack,
			Topics: m.Topics, Owned: tpsFromPB(m.Owned), UserData: m.UserData,
		})
	}
	for _, t := range req.Topics {
		st := sdk.Topic{Name: t.Name, Partitions: t.Partitions}
		if t.HasRacks {
			st.Racks = make([][]string, len(t.Racks))
			for i, r := range t.Racks {
				st.Racks[i] = r.Racks
			}
		}
		g.Topics = append(g.Topics, st)
	}
	return g
}

func planToPB(p *sdk.Plan) *pluginpb.AssignResponse {
	resp := &pluginpb.AssignResponse{}
	if p == nil {
		return resp
	}
	for id, tps := range p.Assignments {
		resp.Assignments = append(resp.Assignments, &pluginpb.MemberAssignment{MemberId: id, Partitions: tpsToPB(tps)})
	}
	return resp
}

func planFromPB(resp *pluginpb.AssignResponse) *sdk.Plan {
	p := &sdk.Plan{Assignments: make(map[string][]sdk.TopicPartition, len(resp.Assignments))}
	for _, a := range resp.Assignments {
		p.Assignments[a.MemberId] = append(p.Assignments[a.MemberId], tpsFromPB(a.Partitions)...)
	}
	return p
}

// tpsToPB groups consecutive partitions of one topic, keeping the order.
func tpsToPB(tps []sdk.TopicPartition) []*pluginpb.TopicPartitions {
	var out []*pluginpb.TopicPartitions
	for _, tp := range tps {
		if n := len(out); n > 0 && out[n-1].Topic == tp.Topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.Partition)
			continue
		}
		out = append(out, &pluginpb.TopicPartitions{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	return out
}

func tpsFromPB(in []*pluginpb.TopicPartitions) []sdk.TopicPartition {
	n := 0
	for _, t := range in {
		n += len(t.Partitions)
	}
	if n == 0 {
		return nil
	}
	out := make([]sdk.TopicPartition, 0, n)
	for _, t := range in {
		for _, p := range t.Partitions {
			out = append(out, sdk.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return slices.Clip(out)
}
