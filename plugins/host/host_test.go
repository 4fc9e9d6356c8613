package host

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/host/internal/testplugin"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// TestMain doubles as the test plugin: the host runs this test binary
// as `<binary> plugin <kind> <name>`.
func TestMain(m *testing.M) {
	if testplugin.Main(os.Args[1:]) {
		return
	}
	os.Exit(m.Run())
}

// recordHandler keeps every log record (with the logger's attributes).
type recordHandler struct {
	mu    *sync.Mutex
	recs  *[]string
	attrs []slog.Attr
}

func newRecorder() (*slog.Logger, func() []string) {
	h := &recordHandler{mu: &sync.Mutex{}, recs: new([]string)}
	return slog.New(h), func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return append([]string(nil), *h.recs...)
	}
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, b.String())
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordHandler{mu: h.mu, recs: h.recs, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h *recordHandler) WithGroup(string) slog.Handler { return h }

// testHost returns a host with fast health checks and backoff that is
// closed when the test ends.
func testHost(t *testing.T, logger *slog.Logger) *Host {
	t.Helper()
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	h := New(Options{Logger: logger, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		HealthInterval: 100 * time.Millisecond, HealthTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { h.Close() })
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func spec(kind, name string, cfg map[string]any) Spec {
	exe, _ := os.Executable()
	return Spec{Kind: kind, Name: name, Path: exe, Args: []string{"plugin", kind, name}, Config: cfg}
}

func load(t *testing.T, h *Host, s Spec) *Plugin {
	t.Helper()
	p, err := h.Load(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAssignorContractOutOfProcess(t *testing.T) {
	p := load(t, testHost(t, nil), spec(serve.KindAssignor, "mod", nil))
	if p.Assignor().Name() != "mod" || p.Info().Kind != serve.KindAssignor {
		t.Fatalf("info %+v", p.Info())
	}
	plugintest.Assignor(t, p.Assignor())
	if p.Calls() == 0 {
		t.Errorf("Calls() = 0 after the contract tests")
	}
}

func TestMetadataStoreContractOutOfProcess(t *testing.T) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		h := testHost(t, nil)
		p := load(t, h, spec(serve.KindMetadataStore, "local", map[string]any{"path": filepath.Join(t.TempDir(), "meta.db")}))
		return p.MetadataStore()
	})
}

func TestAuthenticatorOutOfProcess(t *testing.T) {
	p := load(t, testHost(t, nil), spec(serve.KindAuthenticator, "static", map[string]any{"users": []string{"alice:pw"}}))
	a := p.Authenticator()
	ctx := t.Context()
	start, err := a.Start(ctx, &sdk.StartRequest{Mechanism: "TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.Step(ctx, &sdk.StepRequest{Session: start.Session, Token: []byte("alice:pw")})
	if err != nil || !resp.Done || resp.Principal.Name != "alice" {
		t.Fatalf("Step = %+v, %v", resp, err)
	}
	start, _ = a.Start(ctx, &sdk.StartRequest{Mechanism: "TOKEN"})
	_, err = a.Step(ctx, &sdk.StepRequest{Session: start.Session, Token: []byte("alice:wrong")})
	var ae *sdk.AuthenticationError
	if !errors.As(err, &ae) || ae.Message != "invalid token" || !errors.Is(err, sdk.ErrAuthenticationFailed) {
		t.Errorf("bad token: err = %v", err)
	}
	if _, err := a.Start(ctx, &sdk.StartRequest{Mechanism: "PLAIN"}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("unknown mechanism: err = %v", err)
	}
}

func group() *sdk.Group {
	return &sdk.Group{ID: "g", MemberSet: []sdk.Member{{ID: "a", Topics: []string{"t"}}}, Topics: []sdk.Topic{{Name: "t", Partitions: 4}}}
}

func TestRestartAfterKill(t *testing.T) {
	p := load(t, testHost(t, nil), spec(serve.KindAssignor, "mod", nil))
	a := p.Assignor()
	if _, err := a.Assign(t.Context(), group()); err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Calls fail with ErrUnavailable until the supervisor restarts it.
	sawDown := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := a.Assign(t.Context(), group())
		if err == nil && p.Restarts() > 0 {
			break
		}
		if err != nil {
			if !errors.Is(err, sdk.ErrUnavailable) {
				t.Fatalf("during the outage: err = %v, want sdk.ErrUnavailable", err)
			}
			sawDown = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin not back after 30s (last err %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !sawDown {
		t.Errorf("no call failed while the plugin was dead")
	}
	if p.Pid() == pid || p.Pid() == 0 {
		t.Errorf("pid after restart = %d (was %d)", p.Pid(), pid)
	}
}

func TestConfigErrorNamesPluginAndKey(t *testing.T) {
	h := testHost(t, nil)
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"path": filepath.Join(t.TempDir(), "m.db"), "bogus": 1}, `unknown key(s) "bogus"`},
		{map[string]any{"path": filepath.Join(t.TempDir(), "m.db"), "watch.buffer": "lots"}, `key "watch.buffer"`},
		{nil, `key "path" is required`},
	} {
		_, err := h.Load(t.Context(), spec(serve.KindMetadataStore, "local", tc.cfg))
		if err == nil || !strings.Contains(err.Error(), `plugin "local" (metastore)`) || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sdk.ErrInvalidArgument) {
			t.Errorf("config %v: err = %v, want the plugin's name and %s", tc.cfg, err, tc.want)
		}
	}
	if n := len(h.Plugins()); n != 0 {
		t.Errorf("%d plugins loaded after failed loads", n)
	}
}

func TestWrongKindRefused(t *testing.T) {
	s := spec(serve.KindAssignor, "mod", nil)
	s.Kind = serve.KindMetadataStore
	_, err := testHost(t, nil).Load(t.Context(), s)
	if err == nil || !strings.Contains(err.Error(), "serves a assignor plugin, not a metastore") {
		t.Errorf("err = %v", err)
	}
}

func TestIncompatibleVersionRefused(t *testing.T) {
	t.Parallel() // the go build overlaps the other tests
	bin := filepath.Join(t.TempDir(), "oldplugin")
	// -s -w: no symbol table or DWARF, which halves the link time.
	cmd := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-s -w -X github.com/vltava/vltava/plugins/sdk/serve.servedVersion=99", "./internal/testplugin/cmd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, err := testHost(t, nil).Load(t.Context(), Spec{Kind: serve.KindAssignor, Path: bin, Args: []string{"plugin", "assignor", "mod"}})
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "SDK protocol version 99") ||
		!strings.Contains(err.Error(), "this broker speaks version 2") || !strings.Contains(err.Error(), `plugin "oldplugin"`) {
		t.Errorf("err = %v", err)
	}
}

func TestStderrForwardedWithPluginName(t *testing.T) {
	logger, records := newRecorder()
	p := load(t, testHost(t, logger), spec(serve.KindAssignor, "mod", nil))
	g := group()
	g.ID = "log-me"
	if _, err := p.Assignor().Assign(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	want := "INFO assigning plugin=mod kind=assignor group=log-me members=1"
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, r := range records() {
			if r == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, strings.Join(records(), "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCloseStopsEveryProcess(t *testing.T) {
	h := testHost(t, nil)
	var pids []int
	for range 2 {
		pids = append(pids, load(t, h, spec(serve.KindAssignor, "mod", nil)).Pid())
	}
	p := h.Plugins()[0]
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Close (kill 0: %v)", pid, err)
		}
	}
	if _, err := p.Assignor().Assign(t.Context(), group()); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("call after Close: err = %v, want sdk.ErrUnavailable", err)
	}
}
