package serve

import (
	"context"
	"errors"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

// A whole authenticator with the helpers: PLAIN against a fixed user, in
// a few lines (a plugin's main would end in serve.Authenticator(a)).
func plainExample() sdk.Authenticator {
	return Mechanisms(Plain(func(ctx context.Context, user, password string) (sdk.Principal, error) {
		if user != "alice" || password != "pw" {
			return sdk.Principal{}, &sdk.AuthenticationError{Message: "invalid user or password"}
		}
		return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: user}, nil
	}))
}

// echoConv is a two-step mechanism: the user name, then the password.
type echoConv struct{ user string }

func (c *echoConv) Step(ctx context.Context, tok []byte) ([]byte, bool, sdk.Principal, error) {
	if c.user == "" {
		c.user = string(tok)
		return []byte("password?"), false, sdk.Principal{}, nil
	}
	if string(tok) != c.user+"-pw" {
		return nil, false, sdk.Principal{}, &sdk.AuthenticationError{Message: "bad password"}
	}
	return nil, true, sdk.Principal{Name: c.user}, nil
}

func twoStepExample() sdk.Authenticator {
	return Mechanisms(Mechanism{Name: "TWO-STEP", Start: func(context.Context, *sdk.StartRequest) (Conversation, error) {
		return &echoConv{}, nil
	}})
}

func TestHelpersPassTheContract(t *testing.T) {
	alice := sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}
	t.Run("plain", func(t *testing.T) {
		plugintest.Authenticator(t, plainExample(), []plugintest.AuthCase{
			{Name: "alice", Tokens: [][]byte{[]byte("\x00alice\x00pw")}, Principal: alice},
			{Name: "alice-as-alice", Tokens: [][]byte{[]byte("alice\x00alice\x00pw")}, Principal: alice},
			{Name: "wrong", Tokens: [][]byte{[]byte("\x00alice\x00nope")}, Reject: true},
			{Name: "other-authzid", Tokens: [][]byte{[]byte("bob\x00alice\x00pw")}, Reject: true},
			{Name: "malformed", Tokens: [][]byte{[]byte("alice:pw")}, Reject: true},
		})
	})
	t.Run("two-step", func(t *testing.T) {
		plugintest.Authenticator(t, twoStepExample(), []plugintest.AuthCase{
			{Name: "alice", Tokens: [][]byte{[]byte("alice"), []byte("alice-pw")}, Principal: alice},
			{Name: "wrong", Tokens: [][]byte{[]byte("alice"), []byte("bob-pw")}, Reject: true},
		})
	})
}

// TestSessionsBounded: conversations started and never finished are
// bounded; a full table refuses Start as unavailable.
func TestSessionsBounded(t *testing.T) {
	a := twoStepExample()
	ctx := context.Background()
	for range maxSessions {
		if _, err := a.Start(ctx, &sdk.StartRequest{Mechanism: "TWO-STEP"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Start(ctx, &sdk.StartRequest{Mechanism: "TWO-STEP"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("Start past %d open sessions = %v, want sdk.ErrUnavailable", maxSessions, err)
	}
}
