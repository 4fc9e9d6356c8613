package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// fixedConn is a Conn over one in-process gRPC connection.
type fixedConn struct{ cc grpc.ClientConnInterface }

func (f fixedConn) Conn() (grpc.ClientConnInterface, error) { return f.cc, nil }
func (f fixedConn) String() string                          { return "test plugin" }

// shim connects a client to impl through go-plugin's in-process gRPC
// harness: the same server and client code as out of process, over a
// Unix socket, without a child process.
func shim(t testing.TB, kind string, impl any, register func(*grpc.Server)) grpc.ClientConnInterface {
	t.Helper()
	ctrl := &controlServer{kind: kind, name: kind, impl: impl}
	client, _ := plugin.TestPluginGRPCConn(t, false, plugin.PluginSet{kind: &grpcPlugin{register: func(s *grpc.Server) {
		pluginpb.RegisterControlServer(s, ctrl)
		register(s)
	}}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*Dispensed).Conn
}

// modAssignor gives partition p to the (p mod n)-th subscribed member.
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

func assignorThroughShim(t testing.TB, impl sdk.Assignor) sdk.Assignor {
	cc := shim(t, KindAssignor, impl, func(s *grpc.Server) {
		pluginpb.RegisterAssignorServer(s, &assignorServer{impl: impl})
	})
	return NewAssignorClient(impl.Name(), fixedConn{cc})
}

func TestAssignorContractThroughShim(t *testing.T) {
	plugintest.Assignor(t, assignorThroughShim(t, modAssignor{}))
}

func TestAssignorCarriesEveryField(t *testing.T) {
	var got *sdk.Group
	a := assignorThroughShim(t, assignFunc(func(g *sdk.Group) (*sdk.Plan, error) {
		got = g
		return &sdk.Plan{Assignments: map[string][]sdk.TopicPartition{"m1": {{Topic: "a", Partition: 2}, {Topic: "b", Partition: 0}, {Topic: "a", Partition: 1}}, "m2": nil}}, nil
	}))
	in := &sdk.Group{
		ID: "g",
		MemberSet: []sdk.Member{{ID: "m1", InstanceID: "i1", Rack: "r1", Topics: []string{"a", "b"},
			Owned: []sdk.TopicPartition{{Topic: "a", Partition: 0}}, UserData: []byte{1, 2}}, {ID: "m2", Topics: []string{"a"}}},
		Topics: []sdk.Topic{{Name: "a", Partitions: 3, Racks: [][]string{{"r1"}, nil, {"r1", "r2"}}}, {Name: "b", Partitions: 1}},
	}
	plan, err := a.Assign(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(in) || got.Topics[1].Racks != nil {
		t.Errorf("plugin saw %+v\nwant %+v", got, in)
	}
	want := "map[m1:[{a 2} {b 0} {a 1}] m2:[]]"
	if fmt.Sprint(plan.Assignments) != want {
		t.Errorf("plan = %v, want %v", plan.Assignments, want)
	}
}

type assignFunc func(g *sdk.Group) (*sdk.Plan, error)

func (assignFunc) Name() string { return "func" }
func (f assignFunc) Assign(_ context.Context, g *sdk.Group) (*sdk.Plan, error) {
	return f(g)
}

func TestMetadataStoreContractThroughShim(t *testing.T) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		st, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cc := shim(t, KindMetadataStore, st, func(s *grpc.Server) {
			pluginpb.RegisterMetadataStoreServer(s, &metadataStoreServer{impl: st})
		})
		t.Cleanup(func() { st.Close() })
		_, compactor := any(st).(sdk.Compactor)
		c := NewMetadataStoreClient(fixedConn{cc}, compactor)
		t.Cleanup(func() { c.Close() })
		return c
	})
}

// errAuthenticator fails every call with the error named by the request.
type errAuthenticator struct{}

var testErrors = map[string]error{
	"notfound": fmt.Errorf("wrapped: %w", sdk.ErrNotFound),
	"auth":     fmt.Errorf("plain: %w", &sdk.AuthenticationError{Message: "bad password"}),
	"canceled": context.Canceled,
	"deadline": fmt.Errorf("slow: %w", context.DeadlineExceeded),
	"plain":    errors.New("something odd"),
	"unavail":  sdk.ErrUnavailable,
	"session":  sdk.ErrSessionExpired,
	"mismatch": sdk.ErrVersionMismatch,
}

func (errAuthenticator) Mechanisms(context.Context, *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{Mechanisms: []string{"PLAIN"}}, nil
}
func (errAuthenticator) Start(_ context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	return nil, testErrors[req.Mechanism]
}
func (errAuthenticator) Step(_ context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	return &sdk.StepResponse{Token: req.Token, Done: true, Principal: sdk.Principal{Type: "User", Name: req.Session}}, nil
}
func (errAuthenticator) End(context.Context, *sdk.EndRequest) (*sdk.EndResponse, error) {
	return &sdk.EndResponse{}, nil
}

func TestErrorsKeepTheirIdentity(t *testing.T) {
	cc := shim(t, KindAuthenticator, errAuthenticator{}, func(s *grpc.Server) {
		pluginpb.RegisterAuthenticatorServer(s, &authenticatorServer{impl: errAuthenticator{}})
	})
	a := NewAuthenticatorClient(fixedConn{cc})
	for name, want := range map[string]error{
		"notfound": sdk.ErrNotFound, "auth": sdk.ErrAuthenticationFailed, "canceled": context.Canceled,
		"deadline": context.DeadlineExceeded, "unavail": sdk.ErrUnavailable,
		"session": sdk.ErrSessionExpired, "mismatch": sdk.ErrVersionMismatch,
	} {
		_, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: name})
		if !errors.Is(err, want) {
			t.Errorf("%s: err = %v, want errors.Is %v", name, err, want)
		}
		for _, other := range []error{sdk.ErrNotFound, sdk.ErrSessionExpired, sdk.ErrVersionMismatch, sdk.ErrUnavailable} {
			if other != want && errors.Is(err, other) {
				t.Errorf("%s: err %v also matches %v", name, err, other)
			}
		}
	}
	_, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: "auth"})
	var ae *sdk.AuthenticationError
	if !errors.As(err, &ae) || ae.Message != "bad password" {
		t.Errorf("authentication error lost its message: %v", err)
	}
	_, err = a.Start(t.Context(), &sdk.StartRequest{Mechanism: "plain"})
	if err == nil || !strings.Contains(err.Error(), "something odd") || errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("plain error: %v", err)
	}
	resp, err := a.Step(t.Context(), &sdk.StepRequest{Session: "alice", Token: []byte("tok")})
	if err != nil || !resp.Done || resp.Principal != (sdk.Principal{Type: "User", Name: "alice"}) || string(resp.Token) != "tok" {
		t.Errorf("Step = %+v, %v", resp, err)
	}
	// The caller's own deadline wins over whatever the transport says.
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := a.Mechanisms(ctx, &sdk.MechanismsRequest{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expired ctx: err = %v", err)
	}
}

type configured struct {
	modAssignor
	cfg struct {
		Retries int           `mapstructure:"retries"`
		Wait    time.Duration `mapstructure:"wait"`
		Names   []string      `mapstructure:"names"`
	}
}

func (c *configured) Configure(_ context.Context, raw map[string]any) error {
	return DecodeConfig(raw, &c.cfg)
}

func TestConfigure(t *testing.T) {
	impl := &configured{}
	cc := shim(t, KindAssignor, impl, func(*grpc.Server) {})
	err := Configure(t.Context(), cc, map[string]any{"retries": 3, "wait": "2s", "names": []any{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if impl.cfg.Retries != 3 || impl.cfg.Wait != 2*time.Second || fmt.Sprint(impl.cfg.Names) != "[a b]" {
		t.Errorf("decoded %+v", impl.cfg)
	}
	for raw, want := range map[string]map[string]any{
		`unknown key(s) "bogus"`: {"retries": 1, "bogus": true},
		`key "retries"`:          {"retries": "many"},
	} {
		err := Configure(t.Context(), cc, want)
		if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), raw) {
			t.Errorf("Configure(%v) = %v, want ErrInvalidArgument naming %s", want, err, raw)
		}
	}
	plain := shim(t, KindAssignor, modAssignor{}, func(*grpc.Server) {})
	if err := Configure(t.Context(), plain, nil); err != nil {
		t.Errorf("empty config to a plugin without Configurer: %v", err)
	}
	if err := Configure(t.Context(), plain, map[string]any{"x": 1}); !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("config to a plugin without Configurer: %v", err)
	}
	info, err := ReadInfo(t.Context(), plain)
	if err != nil || info.Kind != KindAssignor || info.Protocol != ProtocolVersion {
		t.Errorf("Info = %+v, %v", info, err)
	}
}

func TestWatchParent(t *testing.T) {
	gone := make(chan struct{})
	go watchParent(-5, time.Millisecond, func() { close(gone) }) // a ppid we never have
	<-gone
}

func TestServedVersion(t *testing.T) {
	if servedProtocol() != ProtocolVersion {
		t.Errorf("servedVersion %q differs from ProtocolVersion %d", servedVersion, ProtocolVersion)
	}
}
