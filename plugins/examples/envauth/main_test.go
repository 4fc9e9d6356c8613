package main

import (
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

func TestContract(t *testing.T) {
	t.Setenv("DEMO_USER", "alice")
	t.Setenv("DEMO_PASSWORD", "pw")
	plugintest.Authenticator(t, serve.Mechanisms(serve.Plain(check)), []plugintest.AuthCase{
		{Name: "alice", Tokens: [][]byte{[]byte("\x00alice\x00pw")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}},
		{Name: "wrong", Tokens: [][]byte{[]byte("\x00alice\x00nope")}, Reject: true},
		{Name: "other-user", Tokens: [][]byte{[]byte("\x00bob\x00pw")}, Reject: true},
	})
}
