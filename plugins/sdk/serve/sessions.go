package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// PasswordFunc checks a user name and password: the whole of a
// single-step mechanism such as SASL PLAIN. A wrong password is an
// *sdk.AuthenticationError (its Message goes to the client).
type PasswordFunc func(ctx context.Context, user, password string) (sdk.Principal, error)

// Conversation is one client's multi-step exchange. Step gets each client
// token in turn and returns the server's answer; done ends it with the
// principal. The session bookkeeping (handles, End, idle sessions) is
// Mechanisms'.
type Conversation interface {
	Step(ctx context.Context, token []byte) (resp []byte, done bool, p sdk.Principal, err error)
}

// Mechanism is one SASL mechanism for Mechanisms: its name and how a
// conversation starts.
type Mechanism struct {
	Name  string
	Start func(ctx context.Context, req *sdk.StartRequest) (Conversation, error)
}

// Plain is SASL PLAIN (RFC 4616) checked by check: the client's one
// message is [authzid] NUL authcid NUL password. An authzid other than
// the user is refused (no acting as another user).
func Plain(check PasswordFunc) Mechanism {
	return Mechanism{Name: "PLAIN", Start: func(context.Context, *sdk.StartRequest) (Conversation, error) {
		return plainConversation(check), nil
	}}
}

type plainConversation PasswordFunc

func (c plainConversation) Step(ctx context.Context, token []byte) ([]byte, bool, sdk.Principal, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, false, sdk.Principal{}, &sdk.AuthenticationError{Message: "malformed PLAIN message"}
	}
	if len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1]) {
		return nil, false, sdk.Principal{}, &sdk.AuthenticationError{Message: "an authorization id other than the user name is not supported"}
	}
	p, err := c(ctx, string(parts[1]), string(parts[2]))
	if err != nil {
		return nil, false, sdk.Principal{}, err
	}
	return nil, true, p, nil
}

// Limits on conversations that never finish (a client that starts and
// goes quiet without the broker calling End).
const (
	maxSessions = 4096
	sessionTTL  = time.Minute
)

// Sessions is an sdk.Authenticator built from Mechanisms: it hands out
// session handles, keeps each conversation until it ends, fails or is
// ended, and drops conversations idle for a minute once 4096 are open.
// Embed it in a type that adds Configure (serve.Configurer) when the
// plugin takes config.
type Sessions struct {
	mechs []Mechanism

	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	mu   sync.Mutex // serializes Steps of one session
	conv Conversation
	last time.Time
}

// Mechanisms returns an authenticator offering mechs in order of
// preference.
//
//	serve.Authenticator(serve.Mechanisms(serve.Plain(check)))
func Mechanisms(mechs ...Mechanism) *Sessions {
	return &Sessions{mechs: mechs, sessions: make(map[string]*session)}
}

// Mechanisms lists the mechanism names.
func (a *Sessions) Mechanisms(context.Context, *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	names := make([]string, len(a.mechs))
	for i, m := range a.mechs {
		names[i] = m.Name
	}
	return &sdk.MechanismsResponse{Mechanisms: names}, nil
}

// Start begins a conversation of the requested mechanism.
func (a *Sessions) Start(ctx context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	var mech *Mechanism
	for i := range a.mechs {
		if a.mechs[i].Name == req.Mechanism {
			mech = &a.mechs[i]
		}
	}
	if mech == nil {
		return nil, fmt.Errorf("serve: mechanism %q: %w", req.Mechanism, sdk.ErrInvalidArgument)
	}
	conv, err := mech.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	rand.Read(id)
	sid := hex.EncodeToString(id)
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sessions) >= maxSessions {
		for k, s := range a.sessions {
			if now.Sub(s.last) > sessionTTL {
				delete(a.sessions, k)
			}
		}
	}
	if len(a.sessions) >= maxSessions {
		return nil, fmt.Errorf("serve: %d conversations in progress: %w", len(a.sessions), sdk.ErrUnavailable)
	}
	a.sessions[sid] = &session{conv: conv, last: now}
	return &sdk.StartResponse{Session: sid}, nil
}

// Step runs one step of a conversation; it ends the session when the
// conversation is done or fails.
func (a *Sessions) Step(ctx context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	a.mu.Lock()
	s, ok := a.sessions[req.Session]
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("serve: unknown session %q: %w", req.Session, sdk.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp, done, p, err := s.conv.Step(ctx, req.Token)
	s.last = time.Now()
	if err != nil || done {
		a.mu.Lock()
		delete(a.sessions, req.Session)
		a.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if done && p.Type == "" {
		p.Type = sdk.PrincipalTypeUser
	}
	return &sdk.StepResponse{Token: resp, Done: done, Principal: p}, nil
}

// End drops a conversation.
func (a *Sessions) End(_ context.Context, req *sdk.EndRequest) (*sdk.EndResponse, error) {
	a.mu.Lock()
	delete(a.sessions, req.Session)
	a.mu.Unlock()
	return &sdk.EndResponse{}, nil
}
