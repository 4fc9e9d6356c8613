package plugintest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
)

// twoStep is a reference authenticator with a two-token mechanism: the
// user name, then the password.
type twoStep struct {
	mu       sync.Mutex
	next     int
	sessions map[string]string // session → user name once sent ("" before)
}

func (a *twoStep) Mechanisms(context.Context, *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{Mechanisms: []string{"TWO-STEP"}}, nil
}

func (a *twoStep) Start(_ context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	if req.Mechanism != "TWO-STEP" {
		return nil, fmt.Errorf("mechanism %q: %w", req.Mechanism, sdk.ErrInvalidArgument)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	id := strconv.Itoa(a.next)
	a.sessions[id] = ""
	return &sdk.StartResponse{Session: id}, nil
}

func (a *twoStep) Step(_ context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	user, ok := a.sessions[req.Session]
	if !ok {
		return nil, fmt.Errorf("session %q: %w", req.Session, sdk.ErrInvalidArgument)
	}
	if user == "" {
		a.sessions[req.Session] = string(req.Token)
		return &sdk.StepResponse{Token: []byte("password?")}, nil
	}
	delete(a.sessions, req.Session)
	if string(req.Token) != user+"-pw" {
		return nil, &sdk.AuthenticationError{Message: "bad password"}
	}
	return &sdk.StepResponse{Done: true, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}}, nil
}

func (a *twoStep) End(_ context.Context, req *sdk.EndRequest) (*sdk.EndResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, req.Session)
	return &sdk.EndResponse{}, nil
}

func TestAuthenticatorContract(t *testing.T) {
	Authenticator(t, &twoStep{sessions: make(map[string]string)}, []AuthCase{
		{Name: "alice", Tokens: [][]byte{[]byte("alice"), []byte("alice-pw")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}},
		{Name: "bob", Mechanism: "TWO-STEP", Tokens: [][]byte{[]byte("bob"), []byte("bob-pw")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "bob"}},
		{Name: "wrong-password", Tokens: [][]byte{[]byte("alice"), []byte("bob-pw")}, Reject: true},
	})
}
