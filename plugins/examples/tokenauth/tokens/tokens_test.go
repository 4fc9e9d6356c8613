package tokens

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk"
)

func configured(t *testing.T) *Authenticator {
	t.Helper()
	a := Unconfigured()
	if err := a.Configure(t.Context(), map[string]any{"tokens": map[string]any{"alice": "s3cret", "bob": "t0ken"}}); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConfigure(t *testing.T) {
	for name, raw := range map[string]map[string]any{
		"unknown key": {"tokens": map[string]any{"alice": "x"}, "realm": "r"},
		"bad type":    {"tokens": []any{"alice"}},
		"no tokens":   {},
		"empty token": {"tokens": map[string]any{"alice": ""}},
	} {
		err := Unconfigured().Configure(t.Context(), raw)
		if !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("%s: Configure = %v, want sdk.ErrInvalidArgument", name, err)
		}
	}
	err := Unconfigured().Configure(t.Context(), map[string]any{"tokens": map[string]any{"alice": "x"}, "realm": "r"})
	if err == nil || !strings.Contains(err.Error(), "realm") {
		t.Errorf("unknown key error %v does not name the key", err)
	}
}

// step runs one PLAIN conversation.
func step(t *testing.T, a *Authenticator, msg string) (*sdk.StepResponse, error) {
	t.Helper()
	st, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: Mechanism})
	if err != nil {
		t.Fatal(err)
	}
	return a.Step(t.Context(), &sdk.StepRequest{Session: st.Session, Token: []byte(msg)})
}

func TestStep(t *testing.T) {
	a := configured(t)
	for _, msg := range []string{"\x00alice\x00s3cret", "alice\x00alice\x00s3cret"} {
		resp, err := step(t, a, msg)
		if err != nil || !resp.Done || resp.Principal != (sdk.Principal{Type: "User", Name: "alice"}) {
			t.Fatalf("%q: resp %+v err %v, want done as User:alice", msg, resp, err)
		}
	}
	for _, msg := range []string{
		"\x00alice\x00t0ken",      // bob's token
		"\x00carol\x00s3cret",     // unknown user
		"bob\x00alice\x00s3cret",  // acting as another user
		"\x00alice\x00s3cret\x00", // extra field
		"alice",                   // not PLAIN
	} {
		_, err := step(t, a, msg)
		var ae *sdk.AuthenticationError
		if !errors.As(err, &ae) || ae.Message == "" {
			t.Errorf("%q: err %v, want an *sdk.AuthenticationError with a message", msg, err)
		}
	}
	if _, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: "SCRAM-SHA-256"}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("Start(SCRAM-SHA-256) = %v, want sdk.ErrInvalidArgument", err)
	}
}

func TestSessionsEnd(t *testing.T) {
	a := configured(t)
	st, err := a.Start(t.Context(), &sdk.StartRequest{Mechanism: Mechanism})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.End(t.Context(), &sdk.EndRequest{Session: st.Session}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Step(t.Context(), &sdk.StepRequest{Session: st.Session, Token: []byte("\x00alice\x00s3cret")}); err == nil {
		t.Fatal("Step on an ended session succeeded")
	}
	if _, err := a.End(t.Context(), &sdk.EndRequest{Session: "never"}); err != nil {
		t.Fatalf("End of an unknown session: %v", err)
	}
}

// TestInBroker serves the authenticator in process in a real broker and
// uses it with franz-go.
func TestInBroker(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.Listeners = "SASL_PLAINTEXT://127.0.0.1:0"
	cfg.LogDirs = t.TempDir()
	b, err := broker.New(cfg, broker.Options{
		Logger:         slog.New(slog.DiscardHandler),
		Authenticators: []sdk.Authenticator{configured(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	client := func(user, token string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RetryTimeout(2*time.Second),
			kgo.SASL(plain.Auth{User: user, Pass: token}.AsMechanism()),
			kgo.DefaultProduceTopic("tokens"), kgo.AllowAutoTopicCreation(),
			kgo.ConsumeTopics("tokens"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := client("alice", "s3cret").ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatalf("produce as alice: %v", err)
	}
	fs := client("bob", "t0ken").PollRecords(ctx, 1)
	if errs := fs.Errors(); len(errs) > 0 || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "hello" {
		t.Fatalf("consume as bob: records %d, errors %v", len(fs.Records()), errs)
	}
	if err := client("alice", "t0ken").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("alice with bob's token: Ping = %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// FuzzStep feeds arbitrary client messages to Step: it must answer with a
// principal only for a listed user's own token, and never panic.
func FuzzStep(f *testing.F) {
	for _, s := range []string{"\x00alice\x00s3cret", "alice\x00alice\x00s3cret", "\x00\x00", "", "\x00alice\x00s3cret\x00x", "bob\x00alice\x00s3cret"} {
		f.Add([]byte(s))
	}
	a, err := New(Config{Tokens: map[string]string{"alice": "s3cret"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		resp, err := step(t, a, string(msg))
		if err == nil && (!resp.Done || resp.Principal.Name != "alice" || !strings.HasSuffix(string(msg), "\x00alice\x00s3cret")) {
			t.Fatalf("%q accepted as %+v", msg, resp)
		}
	})
}
