package simple

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	xscram "github.com/xdg-go/scram"

	"github.com/vltava/vltava/plugins/authn/scram"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

// seededStore seeds a real local store with alice (both SCRAM mechanisms,
// password "pw") and bob (SCRAM-SHA-256 only, "bobpw").
func seededStore(t testing.TB) sdk.MetadataStore {
	st, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, u := range []struct{ user, pass, mech string }{
		{"alice", "pw", scram.SHA256}, {"alice", "pw", scram.SHA512}, {"bob", "bobpw", scram.SHA256},
	} {
		c, err := scram.New(u.mech, u.pass, scram.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(context.Background(), &sdk.PutRequest{Key: scram.Key(u.user, u.mech), Value: c.Encode(), ExpectVersion: sdk.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// scramClient is a plugintest client for a SCRAM conversation, played by
// xdg-go/scram.
func scramClient(mech, user, pass string) func() func([]byte) []byte {
	return func() func([]byte) []byte {
		h := xscram.SHA256
		if mech == scram.SHA512 {
			h = xscram.SHA512
		}
		cl, _ := h.NewClient(user, pass, "")
		conv := cl.NewConversation()
		return func(server []byte) []byte {
			out, err := conv.Step(string(server))
			if err != nil {
				return []byte("client-error")
			}
			return []byte(out)
		}
	}
}

// contractCases are the contract cases every simple authenticator passes.
func contractCases() []plugintest.AuthCase {
	alice := sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}
	return []plugintest.AuthCase{
		{Name: "plain", Mechanism: Plain, Tokens: [][]byte{[]byte("\x00alice\x00pw")}, Principal: alice},
		{Name: "plain-sha256-only", Mechanism: Plain, Tokens: [][]byte{[]byte("bob\x00bob\x00bobpw")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "bob"}},
		{Name: "plain-wrong", Mechanism: Plain, Tokens: [][]byte{[]byte("\x00alice\x00nope")}, Reject: true},
		{Name: "plain-unknown", Mechanism: Plain, Tokens: [][]byte{[]byte("\x00mallory\x00pw")}, Reject: true},
		{Name: "scram-256", Mechanism: scram.SHA256, NewClient: scramClient(scram.SHA256, "alice", "pw"), Steps: 2, Principal: alice},
		{Name: "scram-512", Mechanism: scram.SHA512, NewClient: scramClient(scram.SHA512, "alice", "pw"), Steps: 2, Principal: alice},
		{Name: "scram-512-wrong", Mechanism: scram.SHA512, NewClient: scramClient(scram.SHA512, "alice", "nope"), Steps: 2, Reject: true},
		{Name: "scram-512-no-credential", Mechanism: scram.SHA512, NewClient: scramClient(scram.SHA512, "bob", "bobpw"), Steps: 2, Reject: true},
	}
}

func TestContract(t *testing.T) {
	a, err := New(seededStore(t))
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Authenticator(t, a, contractCases())
}

// TestNoStore: without a store a login fails as unavailable, never as
// admitted or as a wrong password.
func TestNoStore(t *testing.T) {
	a, _ := New(nil)
	ctx := context.Background()
	st, err := a.Start(ctx, &sdk.StartRequest{Mechanism: Plain})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Step(ctx, &sdk.StepRequest{Session: st.Session, Token: []byte("\x00alice\x00pw")})
	if !errors.Is(err, sdk.ErrUnavailable) || errors.Is(err, sdk.ErrAuthenticationFailed) {
		t.Fatalf("login without a store: %v, want sdk.ErrUnavailable", err)
	}
}

func TestConfigure(t *testing.T) {
	a, _ := New(nil)
	if err := a.Configure(context.Background(), map[string]any{"mechanisms": "PLAIN,SCRAM-SHA-512"}); err != nil {
		t.Fatal(err)
	}
	m, _ := a.Mechanisms(context.Background(), &sdk.MechanismsRequest{})
	if len(m.Mechanisms) != 2 || m.Mechanisms[0] != Plain {
		t.Fatalf("mechanisms %v", m.Mechanisms)
	}
	if err := a.Configure(context.Background(), map[string]any{"mechanisms": "GSSAPI"}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("GSSAPI accepted: %v", err)
	}
}
