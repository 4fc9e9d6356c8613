// Package simple is the "simple" authenticator: SASL PLAIN and
// SCRAM-SHA-256/512 (RFC 5802, RFC 7677) against SCRAM credentials kept in
// the broker's metadata store (package plugins/authn/scram describes the
// record, the nonce rules and how unknown users are hidden).
//
// # Where the credentials come from
//
// The broker owns the metadata store; this plugin never opens one. It
// implements sdk.StoreReader, so the plugin host lends it a read-only view
// of the store's /security/ prefix over the plugin connection, and every
// conversation reads the user's credential there when the client names
// itself. Credentials are written only by the broker
// (AlterUserScramCredentials, `vltava user add`), which derives them from
// the salted password the client sends; a change takes effect at the next
// login, on every broker, with no restart and no cache to invalidate.
// The alternatives were worse: a store connection of the plugin's own
// would need the store's address and credentials in plugin config and
// break with the embedded local store (one bbolt file, one process);
// pushing credentials into the plugin would copy every user's keys into
// each plugin process and need re-pushing after a restart.
//
// # PLAIN
//
// A PLAIN password is checked against the user's SCRAM-SHA-512
// credential, or its SCRAM-SHA-256 one when it has no SHA-512 one: the
// password is salted and iterated with the stored salt and count and the
// derived StoredKey compared in constant time. An unknown user costs the
// same work. PLAIN sends the password in clear on the wire: use it on TLS
// listeners or trusted networks only.
//
// # Config
//
//	sasl.authenticator.config:
//	  simple:
//	    mechanisms: PLAIN,SCRAM-SHA-512   # default: all three
//
// Failures: a wrong password or unknown user is refused with "invalid user
// name or password"; a store that cannot be read makes the login fail
// with sdk.ErrUnavailable, which the broker turns into a closed
// connection the client retries — never an admission.
package simple

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/vltava/vltava/plugins/authn/scram"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Mechanism names.
const Plain = "PLAIN"

// AllMechanisms is what the plugin offers by default, in preference order.
var AllMechanisms = []string{scram.SHA512, scram.SHA256, Plain}

// Config is the plugin's configuration.
type Config struct {
	// Mechanisms restricts the mechanisms offered; empty offers all.
	Mechanisms []string `mapstructure:"mechanisms"`
}

// Authenticator is the simple authenticator. The zero value is not
// usable; create it with New.
type Authenticator struct {
	*serve.Sessions
	store atomic.Pointer[sdk.MetadataStore]
}

// New returns an authenticator offering mechs (all when empty) that reads
// credentials from store (which UseStore may set later).
func New(store sdk.MetadataStore, mechs ...string) (*Authenticator, error) {
	a := &Authenticator{}
	if store != nil {
		a.store.Store(&store)
	}
	return a, a.offer(mechs)
}

func (a *Authenticator) offer(mechs []string) error {
	if len(mechs) == 0 {
		mechs = AllMechanisms
	}
	var ms []serve.Mechanism
	for _, m := range mechs {
		switch {
		case m == Plain:
			ms = append(ms, serve.Plain(a.checkPlain))
		case scram.KafkaType(m) != 0:
			ms = append(ms, serve.Mechanism{Name: m, Start: func(context.Context, *sdk.StartRequest) (serve.Conversation, error) {
				s, err := scram.NewServer(m, a.lookup)
				return scramConversation{s}, err
			}})
		default:
			return fmt.Errorf("config: key %q: unknown mechanism %q (want some of %v): %w", "mechanisms", m, AllMechanisms, sdk.ErrInvalidArgument)
		}
	}
	a.Sessions = serve.Mechanisms(ms...)
	return nil
}

// UseStore receives the broker's store (sdk.StoreReader).
func (a *Authenticator) UseStore(store sdk.MetadataStore) { a.store.Store(&store) }

// Configure decodes Config (serve.Configurer).
func (a *Authenticator) Configure(ctx context.Context, raw map[string]any) error {
	var cfg Config
	if err := serve.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	for _, m := range cfg.Mechanisms {
		if !slices.Contains(AllMechanisms, m) {
			return fmt.Errorf("config: key %q: unknown mechanism %q (want some of %v): %w", "mechanisms", m, AllMechanisms, sdk.ErrInvalidArgument)
		}
	}
	return a.offer(cfg.Mechanisms)
}

func (a *Authenticator) lookup(ctx context.Context, user, mech string) (scram.Credential, error) {
	sp := a.store.Load()
	if sp == nil {
		return scram.Credential{}, fmt.Errorf("simple: no metadata store to read credentials from: %w", sdk.ErrUnavailable)
	}
	c, err := scram.Lookup(ctx, *sp, user, mech)
	if err != nil && !errors.Is(err, sdk.ErrNotFound) && !errors.Is(err, sdk.ErrUnavailable) {
		err = fmt.Errorf("simple: reading %s credential: %w (%w)", mech, err, sdk.ErrUnavailable)
	}
	return c, err
}

// dummy is what an unknown user's PLAIN password is checked against.
var dummy, _ = scram.New(scram.SHA512, "", scram.DefaultIterations)

func (a *Authenticator) checkPlain(ctx context.Context, user, password string) (sdk.Principal, error) {
	var cred scram.Credential
	var err error
	for _, m := range []string{scram.SHA512, scram.SHA256} {
		if cred, err = a.lookup(ctx, user, m); !errors.Is(err, sdk.ErrNotFound) {
			break
		}
	}
	switch {
	case errors.Is(err, sdk.ErrNotFound):
		dummy.CheckPassword(password)
		return sdk.Principal{}, &sdk.AuthenticationError{Message: "invalid user name or password"}
	case err != nil:
		return sdk.Principal{}, err
	case !cred.CheckPassword(password):
		return sdk.Principal{}, &sdk.AuthenticationError{Message: "invalid user name or password"}
	}
	return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}, nil
}

type scramConversation struct{ s *scram.Server }

func (c scramConversation) Step(ctx context.Context, token []byte) ([]byte, bool, sdk.Principal, error) {
	resp, done, err := c.s.Step(ctx, token)
	if err != nil || !done {
		return resp, false, sdk.Principal{}, err
	}
	return resp, true, sdk.Principal{Type: sdk.PrincipalTypeUser, Name: c.s.User()}, nil
}
