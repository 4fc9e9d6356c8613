package host

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// waitFor polls cond every 10ms until it holds; the deadline only stops a
// hang, it asserts no speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHungPluginRestarted: a process that stops answering (SIGSTOP) fails
// its health checks, is killed, and is replaced by a new process.
func TestHungPluginRestarted(t *testing.T) {
	p := load(t, testHost(t, nil), spec(serve.KindAssignor, "mod", nil))
	pid := p.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // if the host did not
	waitFor(t, "the hung plugin to be restarted", func() bool { return p.Restarts() > 0 })
	if got := p.Pid(); got == pid || got == 0 {
		t.Fatalf("pid after restart = %d (hung one was %d)", got, pid)
	}
	if _, err := p.Assignor().Assign(t.Context(), group()); err != nil {
		t.Fatalf("Assign after the restart: %v", err)
	}
	// The hung process was killed, not left stopped.
	waitFor(t, "the hung process to be gone", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}

// TestWatchFailsWhenStoreRestarts: a watch open through the host ends
// with sdk.ErrUnavailable when the store's process dies (its watches are
// gone with it), and a new watch works once the store is back.
func TestWatchFailsWhenStoreRestarts(t *testing.T) {
	p := load(t, testHost(t, nil), spec(serve.KindMetadataStore, "local", map[string]any{"path": filepath.Join(t.TempDir(), "m.db")}))
	store := p.MetadataStore()
	w, err := store.Watch(t.Context(), &sdk.WatchRequest{Prefix: "/topics/"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := w.Recv()
		errc <- err
	}()
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, sdk.ErrUnavailable) {
			t.Fatalf("Recv after the store died: %v, want sdk.ErrUnavailable", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a speed assert
		t.Fatal("Recv still blocked 30s after the store died")
	}
	if _, err := w.Recv(); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("second Recv: %v, want the same sdk.ErrUnavailable", err)
	}
	// Re-watch once the store is back, as the package doc tells watchers.
	waitFor(t, "the store to restart", func() bool { return p.Restarts() > 0 })
	w2, err := store.Watch(t.Context(), &sdk.WatchRequest{Prefix: "/topics/"})
	if err != nil {
		t.Fatalf("Watch after the restart: %v", err)
	}
	defer w2.Close()
	if _, err := store.Put(t.Context(), &sdk.PutRequest{Key: "/topics/a", Value: []byte("x"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatal(err)
	}
	ev, err := w2.Recv()
	if err != nil || ev.Key != "/topics/a" || ev.Type != sdk.EventPut {
		t.Fatalf("new watch: %+v, %v", ev, err)
	}
}

func TestAuthenticatorContractOutOfProcess(t *testing.T) {
	p := load(t, testHost(t, nil), spec(serve.KindAuthenticator, "static", map[string]any{"users": []string{"alice:pw", "bob:pw2"}}))
	plugintest.Authenticator(t, p.Authenticator(), []plugintest.AuthCase{
		{Name: "alice", Tokens: [][]byte{[]byte("alice:pw")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}},
		{Name: "bob", Tokens: [][]byte{[]byte("bob:pw2")}, Principal: sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "bob"}},
		{Name: "wrong", Tokens: [][]byte{[]byte("alice:pw2")}, Reject: true},
	})
}
