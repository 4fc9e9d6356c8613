// Package tokens is an example authenticator: SASL PLAIN (RFC 4616) where
// the password is a token from a static list in the plugin's config.
//
//	tokens:
//	  alice: s3cret
//	  bob: t0ken
//
// A client authenticates as alice with username "alice" and password
// "s3cret" and acts as principal User:alice. The plugin binary serving it
// is its parent directory's main package. serve.Mechanisms does the
// session bookkeeping and serve.Plain parses PLAIN; this package only
// checks a user and password.
package tokens

import (
	"context"
	"crypto/subtle"
	"fmt"
	"sync/atomic"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Mechanism is the one SASL mechanism offered.
const Mechanism = "PLAIN"

// Config is the plugin's configuration.
type Config struct {
	// Tokens maps a user name to its token.
	Tokens map[string]string `mapstructure:"tokens"`
}

// Authenticator checks PLAIN credentials against Config.Tokens. Create it
// with New, or with Unconfigured and give it its tokens with Configure.
type Authenticator struct {
	*serve.Sessions
	tokens atomic.Pointer[map[string]string]
}

// Unconfigured returns an Authenticator that refuses everyone until
// Configure gives it tokens.
func Unconfigured() *Authenticator {
	a := &Authenticator{}
	a.Sessions = serve.Mechanisms(serve.Plain(a.check))
	return a
}

// New returns an Authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	a := Unconfigured()
	return a, a.set(cfg)
}

// Configure decodes the plugin config map (serve.Configurer).
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
	a.tokens.Store(&cfg.Tokens)
	return nil
}

// check compares the token in constant time, and compares even for an
// unknown user, so timing does not tell users apart.
func (a *Authenticator) check(_ context.Context, user, token string) (sdk.Principal, error) {
	var tokens map[string]string
	if p := a.tokens.Load(); p != nil {
		tokens = *p
	}
	want, known := tokens[user]
	if subtle.ConstantTimeCompare([]byte(want), []byte(token)) != 1 || !known {
		return sdk.Principal{}, &sdk.AuthenticationError{Message: "invalid user or token"}
	}
	return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}, nil
}
