package tokens

import (
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

// TestAuthenticatorContract runs the sdk.Authenticator contract tests in
// process (examples_test runs them out of process, through the binary).
func TestAuthenticatorContract(t *testing.T) {
	plugintest.Authenticator(t, configured(t), []plugintest.AuthCase{
		{Name: "alice", Tokens: [][]byte{[]byte("\x00alice\x00s3cret")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}},
		{Name: "bob-as-bob", Tokens: [][]byte{[]byte("bob\x00bob\x00t0ken")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "bob"}},
		{Name: "wrong-token", Tokens: [][]byte{[]byte("\x00alice\x00t0ken")}, Reject: true},
		{Name: "unknown-user", Tokens: [][]byte{[]byte("\x00mallory\x00s3cret")}, Reject: true},
		{Name: "act-as-other", Tokens: [][]byte{[]byte("bob\x00alice\x00s3cret")}, Reject: true},
		{Name: "malformed", Tokens: [][]byte{[]byte("alice:s3cret")}, Reject: true},
	})
}
