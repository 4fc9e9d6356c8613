// Package testplugin holds the plugins the host's tests run: a test binary
// re-executes itself as `<test binary> plugin <kind> <name>`, and
// cmd/ builds one as a separate executable (for the version test).
package testplugin

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	rangeassignor "github.com/vltava/vltava/plugins/assignor/range"
	"github.com/vltava/vltava/plugins/builtin"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Main serves the plugin named by args (kind, name) if args start with
// "plugin", and reports whether it did (it never returns then).
func Main(args []string) bool {
	if len(args) < 3 || args[0] != "plugin" {
		return false
	}
	kind, name := args[1], args[2]
	switch {
	case kind == serve.KindAssignor && name == "mod":
		serve.Assignor(Mod{})
	case kind == serve.KindAssignor && name == "canned":
		serve.Assignor(&Canned{})
	case kind == serve.KindAuthenticator && name == "static":
		serve.Authenticator(&Static{})
	default:
		p, err := builtin.Lookup(kind, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		p.Serve()
	}
	return true
}

// Mod gives partition p to the (p mod n)-th subscribed member. It logs
// the rounds of groups whose ID starts with "log-" (for the stderr
// forwarding test).
type Mod struct{}

// Name is "mod".
func (Mod) Name() string { return "mod" }

// Assign computes the plan.
func (Mod) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	if strings.HasPrefix(g.ID, "log-") {
		slog.Info("assigning", "group", g.ID, "members", len(g.MemberSet))
	}
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

// Canned is the range assignor with a memory: it computes a group's plan
// once and returns the stored plan for every later call with the same
// group ID, so a benchmark of it times the transport and the message
// encoding without the assignment work.
type Canned struct {
	mu    sync.Mutex
	plans map[string]*sdk.Plan
}

// Name is "canned".
func (*Canned) Name() string { return "canned" }

// Assign returns the stored plan for g.ID, computing it the first time.
func (c *Canned) Assign(ctx context.Context, g *sdk.Group) (*sdk.Plan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.plans[g.ID]; ok {
		return p, nil
	}
	p, err := rangeassignor.Assignor{}.Assign(ctx, g)
	if err != nil {
		return nil, err
	}
	if c.plans == nil {
		c.plans = make(map[string]*sdk.Plan)
	}
	c.plans[g.ID] = p
	return p, nil
}

// Static accepts the single token "user:secret" for mechanism PLAIN-ish
// "TOKEN" and reports the principal "user". Config: users (list of
// "name:secret").
type Static struct {
	cfg struct {
		Users []string `mapstructure:"users"`
	}
	next     atomic.Int64
	sessions sync.Map
}

// Configure reads the user list.
func (s *Static) Configure(_ context.Context, raw map[string]any) error {
	return serve.DecodeConfig(raw, &s.cfg)
}

// Mechanisms offers TOKEN.
func (s *Static) Mechanisms(context.Context, *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{Mechanisms: []string{"TOKEN"}}, nil
}

// Start opens a session.
func (s *Static) Start(_ context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	if req.Mechanism != "TOKEN" {
		return nil, fmt.Errorf("mechanism %q: %w", req.Mechanism, sdk.ErrInvalidArgument)
	}
	id := strconv.FormatInt(s.next.Add(1), 10)
	s.sessions.Store(id, true)
	return &sdk.StartResponse{Session: id}, nil
}

// Step checks the token.
func (s *Static) Step(_ context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	if _, ok := s.sessions.LoadAndDelete(req.Session); !ok {
		return nil, fmt.Errorf("session %q: %w", req.Session, sdk.ErrInvalidArgument)
	}
	for _, u := range s.cfg.Users {
		if bytes.Equal([]byte(u), req.Token) {
			name, _, _ := bytes.Cut(req.Token, []byte(":"))
			return &sdk.StepResponse{Done: true, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: string(name)}}, nil
		}
	}
	return nil, &sdk.AuthenticationError{Message: "invalid token"}
}

// End drops a session.
func (s *Static) End(_ context.Context, req *sdk.EndRequest) (*sdk.EndResponse, error) {
	s.sessions.Delete(req.Session)
	return &sdk.EndResponse{}, nil
}
