package authn_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	xscram "github.com/xdg-go/scram"

	"github.com/vltava/vltava/daemon/daemontest"
	scramcred "github.com/vltava/vltava/plugins/authn/scram"
	"github.com/vltava/vltava/plugins/host"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
)

// BenchmarkSCRAMLoginOutOfProcess is one SCRAM-SHA-512 login (client
// work included) through the simple plugin process, its credential read
// from a local store lent through the host.
//
//	go test -run XXX -bench SCRAMLogin ./plugins/authn/
func BenchmarkSCRAMLoginOutOfProcess(b *testing.B) {
	st, err := local.Open(filepath.Join(b.TempDir(), "meta.db"), local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c, _ := scramcred.New(scramcred.SHA512, "pw", scramcred.MinIterations)
	st.Put(b.Context(), &sdk.PutRequest{Key: scramcred.Key("alice", scramcred.SHA512), Value: c.Encode(), ExpectVersion: sdk.AnyVersion})
	h := host.New(host.Options{Logger: slog.New(slog.DiscardHandler)})
	defer h.Close()
	p, err := h.Load(b.Context(), host.Spec{Kind: "authenticator", Name: "simple", Path: daemontest.Build(b),
		Args: []string{"plugin", "authenticator", "simple"}, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	a := p.Authenticator()
	cl, _ := xscram.SHA512.NewClient("alice", "pw", "")
	b.ResetTimer()
	for b.Loop() {
		conv := cl.NewConversation()
		s, err := a.Start(b.Context(), &sdk.StartRequest{Mechanism: "SCRAM-SHA-512"})
		if err != nil {
			b.Fatal(err)
		}
		tok, _ := conv.Step("")
		for {
			resp, err := a.Step(b.Context(), &sdk.StepRequest{Session: s.Session, Token: []byte(tok)})
			if err != nil {
				b.Fatal(err)
			}
			if resp.Done {
				break
			}
			if tok, err = conv.Step(string(resp.Token)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkAdmitOutOfProcess is the ip plugin's decision on one accepted
// connection, through the plugin process.
func BenchmarkAdmitOutOfProcess(b *testing.B) {
	h := host.New(host.Options{Logger: slog.New(slog.DiscardHandler)})
	defer h.Close()
	p, err := h.Load(b.Context(), host.Spec{Kind: "authenticator", Name: "ip", Path: daemontest.Build(b),
		Args:   []string{"plugin", "authenticator", "ip"},
		Config: map[string]any{"rules": []any{map[string]any{"deny": "10.0.0.0/8"}, map[string]any{"allow": "127.0.0.0/8", "principal": "local"}}}})
	if err != nil {
		b.Fatal(err)
	}
	f := p.Authenticator().(sdk.ConnFilter)
	for b.Loop() {
		resp, err := f.Admit(b.Context(), &sdk.AdmitRequest{ClientAddr: "127.0.0.1:5555", ListenerName: "PLAINTEXT"})
		if err != nil || !resp.Allowed {
			b.Fatal(resp, err)
		}
	}
}
