package serve

import (
	"context"
	"fmt"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

type assignorServer struct {
	pluginpb.UnimplementedAssignorServer
	impl sdk.Assignor
}

func (s *assignorServer) Assign(ctx context.Context, req *pluginpb.AssignRequest) (*pluginpb.AssignResponse, error) {
	g, err := groupFromPB(req)
	if err != nil {
		return nil, toStatus(err)
	}
	plan, err := s.impl.Assign(ctx, g)
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
	plan, err := planFromPB(resp)
	if err != nil {
		return nil, fmt.Errorf("serve: %s: %w", a.c, err)
	}
	return plan, nil
}
