// Tests that build the example plugins as separate binaries and use them
// out of process, through the plugin host and the gRPC shim.
package examples_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/host"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// binDir holds the example binaries, built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "vltava-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The broker binary too (built here rather than with daemontest.Build:
	// daemontest.Start always sets a PLAINTEXT --listen, and this test
	// needs a SASL_PLAINTEXT listener from the config file).
	// One go build links the three in parallel; -s -w (no symbol table or
	// DWARF) halves the link time, which is most of this package's.
	cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", dir+string(filepath.Separator), "./stickyassignor", "./tokenauth", "../../daemon")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build examples: %v\n%s", err, out)
		return 1
	}
	binDir = dir
	return m.Run()
}

func bin(name string) string { return filepath.Join(binDir, name) }

// testHost is a plugin host closed when the test ends.
func testHost(t *testing.T) *host.Host {
	h := host.New(host.Options{Logger: testLogger()})
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	return h
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestStickyAssignorOutOfProcess runs the assignor contract tests against
// the stickyassignor binary through the gRPC shim.
func TestStickyAssignorOutOfProcess(t *testing.T) {
	p, err := testHost(t).Load(ctxT(t), host.Spec{Kind: serve.KindAssignor, Path: bin("stickyassignor")})
	if err != nil {
		t.Fatal(err)
	}
	if info := p.Info(); info.Kind != serve.KindAssignor || info.Name != "sticky" {
		t.Fatalf("plugin describes itself as %s %q, want assignor \"sticky\"", info.Kind, info.Name)
	}
	a := p.Assignor()
	if a.Name() != "sticky" {
		t.Fatalf("Name() = %q, want sticky", a.Name())
	}
	plugintest.Assignor(t, a)
	if p.Calls() == 0 {
		t.Fatal("the contract tests made no call to the plugin process")
	}
}

// TestTokenAuthContractOutOfProcess runs the authenticator contract tests
// against the tokenauth binary through the gRPC shim.
func TestTokenAuthContractOutOfProcess(t *testing.T) {
	p, err := testHost(t).Load(ctxT(t), host.Spec{
		Kind:   serve.KindAuthenticator,
		Path:   bin("tokenauth"),
		Config: map[string]any{"tokens": map[string]any{"alice": "s3cret", "bob": "t0ken"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Authenticator(t, p.Authenticator(), []plugintest.AuthCase{
		{Name: "alice", Tokens: [][]byte{[]byte("\x00alice\x00s3cret")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}},
		{Name: "bob", Tokens: [][]byte{[]byte("\x00bob\x00t0ken")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "bob"}},
		{Name: "wrong-token", Tokens: [][]byte{[]byte("\x00alice\x00t0ken")}, Reject: true},
		{Name: "malformed", Tokens: [][]byte{[]byte("alice:s3cret")}, Reject: true},
	})
	if p.Calls() == 0 {
		t.Fatal("the contract tests made no call to the plugin process")
	}
}

// TestTokenAuthOutOfProcess serves a SASL listener with the tokenauth
// binary and authenticates franz-go clients through it.
func TestTokenAuthOutOfProcess(t *testing.T) {
	p, err := testHost(t).Load(ctxT(t), host.Spec{
		Kind:   serve.KindAuthenticator,
		Path:   bin("tokenauth"),
		Config: map[string]any{"tokens": map[string]any{"alice": "s3cret", "bob": "t0ken"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultBroker()
	cfg.Listeners = "SASL_PLAINTEXT://127.0.0.1:0"
	cfg.LogDirs = t.TempDir()
	b, err := broker.New(cfg, broker.Options{Logger: testLogger(), Authenticators: []sdk.Authenticator{p.Authenticator()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	checkTokenClients(t, b.Addr())
}

// checkTokenClients produces as alice, consumes as bob, and checks that a
// wrong token is refused with SASL_AUTHENTICATION_FAILED.
func checkTokenClients(t *testing.T, addr string) {
	t.Helper()
	client := func(user, token string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(5*time.Second),
			kgo.SASL(plain.Auth{User: user, Pass: token}.AsMechanism()),
			kgo.DefaultProduceTopic("tokens"), kgo.AllowAutoTopicCreation(),
			kgo.ConsumeTopics("tokens"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := ctxT(t)
	if err := client("alice", "s3cret").ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatalf("produce as alice: %v", err)
	}
	fs := client("bob", "t0ken").PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "hello" {
		t.Fatalf("consume as bob: %d records, errors %v", len(fs.Records()), errs)
	}
	if err := client("alice", "t0ken").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("alice with bob's token: Ping = %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestTokenAuthBadConfig: a bad key in the plugin's config fails the load
// with the key named.
func TestTokenAuthBadConfig(t *testing.T) {
	_, err := testHost(t).Load(ctxT(t), host.Spec{
		Kind:   serve.KindAuthenticator,
		Path:   bin("tokenauth"),
		Config: map[string]any{"tokens": map[string]any{"alice": "s3cret"}, "realm": "x"},
	})
	if !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), "realm") {
		t.Fatalf("Load with an unknown key = %v, want sdk.ErrInvalidArgument naming \"realm\"", err)
	}
}
