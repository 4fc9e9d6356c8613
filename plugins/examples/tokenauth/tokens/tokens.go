// Package tokens is an example authenticator: SASL PLAIN (RFC 4616) where
// the password is a token from a static list in the plugin's config.
//
//	tokens:
//	  alice: s3cret
//	  bob: t0ken
//
// A client authenticates as alice with username "alice" and password
// "s3cret" and acts as principal User:alice. The plugin binary serving it
// is its parent directory's main package.
package tokens

import (
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Mechanism is the one SASL mechanism offered.
const Mechanism = "PLAIN"

// Limits on conversations that never finish (a client that sends a
// handshake and goes quiet without the broker noticing).
const (
	maxSessions = 4096
	sessionTTL  = time.Minute
)

// Config is the plugin's configuration.
type Config struct {
	// Tokens maps a user name to its token.
	Tokens map[string]string `mapstructure:"tokens"`
}

// Authenticator checks PLAIN credentials against Config.Tokens. Create it
// with New, or as a zero value that is then given its tokens by Configure.
type Authenticator struct {
	mu       sync.Mutex
	tokens   map[string]string
	next     uint64
	sessions map[string]time.Time // session → started
}

// New returns an Authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{}
	return a, a.set(cfg)
}

// Configure decodes the plugin config map (see Config). It implements
// serve.Configurer.
func (a *Authenticator) Configure(ctx context.Context, raw map[string]any) error {
	var cfg Config
	if err := serve.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	return a.set(cfg)
}

func (a *Authenticator) set(cfg Config) error {
	if len(cfg.Tokens) == 0 {
		return fmt.Errorf("config: key %q: no tokens given: %w", "tokens", sdk.ErrInvalidArgument)
	}
	for user, tok := range cfg.Tokens {
		if user == "" || tok == "" {
			return fmt.Errorf("config: key %q: empty user or token for %q: %w", "tokens", user, sdk.ErrInvalidArgument)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = cfg.Tokens
	return nil
}

// Mechanisms offers PLAIN on every listener.
func (a *Authenticator) Mechanisms(ctx context.Context, req *sdk.MechanismsRequest) (*sdk.MechanismsResponse, error) {
	return &sdk.MechanismsResponse{Mechanisms: []string{Mechanism}}, nil
}

// Start opens a conversation; only PLAIN is supported.
func (a *Authenticator) Start(ctx context.Context, req *sdk.StartRequest) (*sdk.StartResponse, error) {
	if req.Mechanism != Mechanism {
		return nil, fmt.Errorf("tokens: mechanism %q: %w", req.Mechanism, sdk.ErrInvalidArgument)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions == nil {
		a.sessions = make(map[string]time.Time)
	}
	now := time.Now()
	if len(a.sessions) >= maxSessions {
		for id, started := range a.sessions {
			if now.Sub(started) > sessionTTL {
				delete(a.sessions, id)
			}
		}
	}
	if len(a.sessions) >= maxSessions {
		return nil, fmt.Errorf("tokens: %d conversations in progress: %w", len(a.sessions), sdk.ErrUnavailable)
	}
	a.next++
	id := strconv.FormatUint(a.next, 10)
	a.sessions[id] = now
	return &sdk.StartResponse{Session: id}, nil
}

// Step checks the client's one PLAIN message:
// [authzid] NUL authcid NUL token. An authzid other than the authcid is
// refused (no acting as another user).
func (a *Authenticator) Step(ctx context.Context, req *sdk.StepRequest) (*sdk.StepResponse, error) {
	a.mu.Lock()
	_, ok := a.sessions[req.Session]
	delete(a.sessions, req.Session) // one step, whatever the outcome
	tokens := a.tokens
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("tokens: unknown session %q: %w", req.Session, sdk.ErrInvalidArgument)
	}
	parts := bytes.Split(req.Token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, &sdk.AuthenticationError{Message: "malformed PLAIN message"}
	}
	authzid, user, token := string(parts[0]), string(parts[1]), parts[2]
	want, known := tokens[user]
	// Compare even for an unknown user, so timing does not tell users apart.
	match := subtle.ConstantTimeCompare([]byte(want), token) == 1
	if !known || !match || (authzid != "" && authzid != user) {
		return nil, &sdk.AuthenticationError{Message: "invalid user or token"}
	}
	return &sdk.StepResponse{Done: true, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}}, nil
}

// End drops a conversation.
func (a *Authenticator) End(ctx context.Context, req *sdk.EndRequest) (*sdk.EndResponse, error) {
	a.mu.Lock()
	delete(a.sessions, req.Session)
	a.mu.Unlock()
	return &sdk.EndResponse{}, nil
}
