package ip

import (
	"context"
	"errors"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func TestRules(t *testing.T) {
	a := &Authenticator{}
	if err := a.Configure(context.Background(), map[string]any{
		"rules": []any{
			map[string]any{"deny": "10.1.2.0/24"},
			map[string]any{"allow": "127.0.0.1", "principal": "ops"},
			map[string]any{"allow": "10.0.0.0/8", "principal": "internal"},
			map[string]any{"allow": "::1/128"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"127.0.0.1:5000":          "allow ops rule 2: allow 127.0.0.1/32",
		"[::ffff:127.0.0.1]:5000": "allow ops rule 2: allow 127.0.0.1/32",
		"10.1.2.3:1":              "deny  rule 1: deny 10.1.2.0/24",
		"10.9.9.9:1":              "allow internal rule 3: allow 10.0.0.0/8",
		"[::1]:1":                 "allow  rule 4: allow ::1/128",
		"127.0.0.2:5000":          "deny  no rule matches; default deny",
		"nonsense":                `deny  unparsable client address "nonsense"`,
	} {
		resp, err := a.Admit(context.Background(), &sdk.AdmitRequest{ClientAddr: addr, ListenerName: "PLAINTEXT"})
		if err != nil {
			t.Fatal(err)
		}
		verb := "deny"
		if resp.Allowed {
			verb = "allow"
		}
		if got := verb + " " + resp.Principal.Name + " " + resp.Reason; got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
	// Listeners restrict where it applies.
	b, _ := New(Config{Listeners: []string{"SASL_PLAINTEXT"}})
	if r, _ := b.Admit(context.Background(), &sdk.AdmitRequest{ClientAddr: "1.2.3.4:1", ListenerName: "PLAINTEXT"}); !r.Allowed {
		t.Error("a listener the plugin is not attached to was filtered")
	}
	if r, _ := b.Admit(context.Background(), &sdk.AdmitRequest{ClientAddr: "1.2.3.4:1", ListenerName: "SASL_PLAINTEXT"}); r.Allowed {
		t.Error("default deny did not apply")
	}
}

func TestConfigErrors(t *testing.T) {
	for name, raw := range map[string]map[string]any{
		"both":           {"rules": []any{map[string]any{"allow": "1.2.3.4/32", "deny": "1.2.3.4/32"}}},
		"neither":        {"rules": []any{map[string]any{"principal": "x"}}},
		"bad cidr":       {"rules": []any{map[string]any{"allow": "1.2.3.400/32"}}},
		"deny principal": {"rules": []any{map[string]any{"deny": "1.2.3.4/32", "principal": "x"}}},
		"bad default":    {"default": "maybe"},
		"unknown key":    {"rulez": []any{}},
	} {
		if err := (&Authenticator{}).Configure(context.Background(), raw); !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("%s: %v, want sdk.ErrInvalidArgument", name, err)
		}
	}
}

func TestContract(t *testing.T) {
	a, err := New(Config{Rules: []Rule{{Deny: "127.0.0.2/32"}, {Allow: "127.0.0.0/8", Principal: "local"}, {Allow: "::1"}},
		Listeners: []string{"PLAINTEXT"}})
	if err != nil {
		t.Fatal(err)
	}
	local := sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "local"}
	plugintest.ConnFilter(t, a, []plugintest.AdmitCase{
		{ClientAddr: "127.0.0.1:1", ListenerName: "PLAINTEXT", Allowed: true, Principal: local},
		{ClientAddr: "127.0.0.2:1", ListenerName: "PLAINTEXT"},
		{ClientAddr: "[::1]:1", ListenerName: "PLAINTEXT", Allowed: true},
		{ClientAddr: "192.0.2.1:1", ListenerName: "PLAINTEXT"},
		{ClientAddr: "192.0.2.1:1", ListenerName: "SASL_PLAINTEXT", Allowed: true},
	})
}
