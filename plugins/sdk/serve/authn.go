package serve

import (
	"context"
	"fmt"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

type authenticatorServer struct {
	pluginpb.UnimplementedAuthenticatorServer
	impl sdk.Authenticator
}

func (s *authenticatorServer) Mechanisms(ctx context.Context, req *pluginpb.MechanismsRequest) (*pluginpb.MechanismsResponse, error) {
	resp, err := s.impl.Mechanisms(ctx, &sdk.MechanismsRequest{ListenerName: req.ListenerName})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.MechanismsResponse{Mechanisms: resp.Mechanisms}, nil
}

func (s *authenticatorServer) Start(ctx context.Context, req *pluginpb.StartRequest) (*pluginpb.StartResponse, error) {
	resp, err := s.impl.Start(ctx, &sdk.StartRequest{Mechanism: req.Mechanism, ClientAddr: req.ClientAddr, ListenerName: req.ListenerName})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.StartResponse{Session: resp.Session}, nil
}

func (s *authenticatorServer) Step(ctx context.Context, req *pluginpb.StepRequest) (*pluginpb.StepResponse, error) {
	resp, err := s.impl.Step(ctx, &sdk.StepRequest{Session: req.Session, Token: req.Token})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.StepResponse{Token: resp.Token, Done: resp.Done, PrincipalType: resp.Principal.Type, PrincipalName: resp.Principal.Name}, nil
}

func (s *authenticatorServer) End(ctx context.Context, req *pluginpb.EndRequest) (*pluginpb.EndResponse, error) {
	if _, err := s.impl.End(ctx, &sdk.EndRequest{Session: req.Session}); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.EndResponse{}, nil
}

func (s *authenticatorServer) Admit(ctx context.Context, req *pluginpb.AdmitRequest) (*pluginpb.AdmitResponse, error) {
	f, ok := s.impl.(sdk.ConnFilter)
	if !ok {
		return nil, toStatus(fmt.Errorf("serve: the authenticator does not filter connections: %w", sdk.ErrInvalidArgument))
	}
	resp, err := f.Admit(ctx, &sdk.AdmitRequest{ClientAddr: req.ClientAddr, ListenerName: req.ListenerName})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.AdmitResponse{Allowed: resp.Allowed, PrincipalType: resp.Principal.Type, PrincipalName: resp.Principal.Name, Reason: resp.Reason}, nil
}

// NewAuthenticatorClient returns an sdk.Authenticator that calls the
// plugin behind c. With connFilter (the plugin reported one in Info) it
// is an sdk.ConnFilter too.
func NewAuthenticatorClient(c Conn, connFilter ...bool) sdk.Authenticator {
	a := &authenticatorClient{c: c}
	if len(connFilter) > 0 && connFilter[0] {
		return &filterClient{a}
	}
	return a
}

type filterClient struct{ *authenticatorClient }

func (a *filterClient) Admit(ctx context.Context, req *sdk.AdmitRequest) (*sdk.AdmitResponse, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Admit(ctx, &pluginpb.AdmitRequest{ClientAddr: req.ClientAddr, ListenerName: req.ListenerName})
	if err != nil {
		return nil, fromStatus(ctx, a.c, err)
	}
	return &sdk.AdmitResponse{Allowed: resp.Allowed, Reason: resp.Reason,
		Principal: sdk.Principal{Type: resp.PrincipalType, Name: resp.PrincipalName}}, nil
}

type authenticatorClient struct{ c Conn }

func (a *authenticatorClient) client() (pluginpb.AuthenticatorClient, error) {
	cc, err := a.c.Conn()
	if err != nil {
		return nil, err
	}
	return pluginpb.NewAuthenticatorClient(cc), nil
}

func (a *authenticatorClient) Mechanisms(ctx context.Context, req *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Mechanisms(ctx, &pluginpb.MechanismsRequest{ListenerName: req.ListenerName})
	if err != nil {
		return nil, fromStatus(ctx, a.c, err)
	}
	return &sdk.MechanismsResponse{Mechanisms: resp.Mechanisms}, nil
}

func (a *authenticatorClient) Start(ctx context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Start(ctx, &pluginpb.StartRequest{Mechanism: req.Mechanism, ClientAddr: req.ClientAddr, ListenerName: req.ListenerName})
	if err != nil {
		return nil, fromStatus(ctx, a.c, err)
	}
	return &sdk.StartResponse{Session: resp.Session}, nil
}

func (a *authenticatorClient) Step(ctx context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	resp, err := cl.Step(ctx, &pluginpb.StepRequest{Session: req.Session, Token: req.Token})
	if err != nil {
		return nil, fromStatus(ctx, a.c, err)
	}
	out := &sdk.StepResponse{Token: resp.Token, Done: resp.Done}
	if resp.Done {
		out.Principal = sdk.Principal{Type: resp.PrincipalType, Name: resp.PrincipalName}
	}
	return out, nil
}

func (a *authenticatorClient) End(ctx context.Context, req *sdk.EndRequest) (*sdk.EndResponse, error) {
	cl, err := a.client()
	if err != nil {
		return nil, err
	}
	if _, err := cl.End(ctx, &pluginpb.EndRequest{Session: req.Session}); err != nil {
		return nil, fromStatus(ctx, a.c, err)
	}
	return &sdk.EndResponse{}, nil
}
