package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func openStore(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		return openStore(t, filepath.Join(t.TempDir(), "meta.db"), Options{})
	})
}

func TestReopenKeepsValuesAndRevisionDropsEphemeral(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "meta.db")
	s := openStore(t, path, Options{})
	vp := mustPut(t, s, &sdk.PutRequest{Key: "p", Value: []byte("persistent"), ExpectVersion: sdk.MustNotExist})
	sess, err := s.GrantSession(ctx, &sdk.GrantSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, &sdk.PutRequest{Key: "e", Value: []byte("ephemeral"), ExpectVersion: sdk.AnyVersion, Session: sess.ID})
	last := mustPut(t, s, &sdk.PutRequest{Key: "q", Value: []byte("last"), ExpectVersion: sdk.AnyVersion})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2 := openStore(t, path, Options{})
	got, err := s2.Get(ctx, &sdk.GetRequest{Key: "p"})
	if err != nil || string(got.Value) != "persistent" || got.Version != vp {
		t.Fatalf("after reopen Get(p) = %+v, %v; want persistent@%d", got, err, vp)
	}
	if _, err := s2.Get(ctx, &sdk.GetRequest{Key: "e"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("ephemeral key after reopen: err = %v, want ErrNotFound", err)
	}
	l, err := s2.List(ctx, &sdk.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.KVs) != 2 || l.Revision != last+1 { // dropping "e" is one write
		t.Fatalf("after reopen List = %d keys at revision %d; want 2 at %d", len(l.KVs), l.Revision, last+1)
	}
	if v := mustPut(t, s2, &sdk.PutRequest{Key: "p", Value: []byte("again"), ExpectVersion: vp}); v != last+2 {
		t.Fatalf("first write after reopen got version %d, want %d", v, last+2)
	}
	// The old process's session is dead.
	if _, err := s2.KeepAlive(ctx, &sdk.KeepAliveRequest{ID: sess.ID}); !errors.Is(err, sdk.ErrSessionExpired) {
		t.Fatalf("KeepAlive of a previous process's session: err = %v", err)
	}
	// History did not survive: watching from before the reopen fails.
	if _, err := s2.Watch(ctx, &sdk.WatchRequest{FromRevision: vp}); !errors.Is(err, sdk.ErrCompacted) {
		t.Fatalf("Watch from before reopen: err = %v, want ErrCompacted", err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	// A clean reopen (no ephemeral keys) consumes no revision.
	s3 := openStore(t, path, Options{})
	l, err = s3.List(ctx, &sdk.ListRequest{})
	if err != nil || l.Revision != last+2 {
		t.Fatalf("third open: revision %d, %v; want %d", l.Revision, err, last+2)
	}
}

func TestHistoryEvictionCompacts(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "meta.db"), Options{WatchHistory: 4})
	var revs []int64
	for i := range 10 {
		revs = append(revs, mustPut(t, s, &sdk.PutRequest{Key: fmt.Sprintf("k%d", i), ExpectVersion: sdk.AnyVersion}))
	}
	// The last 4 events (revs[6..9]) are held: from revs[5] works.
	if _, err := s.Watch(ctx, &sdk.WatchRequest{FromRevision: revs[4]}); !errors.Is(err, sdk.ErrCompacted) {
		t.Fatalf("Watch from an evicted revision: err = %v, want ErrCompacted", err)
	}
	w, err := s.Watch(ctx, &sdk.WatchRequest{FromRevision: revs[5]})
	if err != nil {
		t.Fatalf("Watch from the oldest held revision: %v", err)
	}
	defer w.Close()
	for i := 6; i < 10; i++ {
		ev, err := w.Recv()
		if err != nil || ev.Revision != revs[i] {
			t.Fatalf("event %d = %+v, %v; want revision %d", i, ev, err, revs[i])
		}
	}
}

// TestSlowWatcherOverflows: a watcher that does not read is cut off
// with ErrWatchOverflow after its buffered events; writers never block.
func TestSlowWatcherOverflows(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "meta.db"), Options{WatchBuffer: 3})
	w, err := s.Watch(ctx, &sdk.WatchRequest{Prefix: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fast, err := s.Watch(ctx, &sdk.WatchRequest{Prefix: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	var revs []int64
	for i := range 6 { // more than the buffer: must not block
		revs = append(revs, mustPut(t, s, &sdk.PutRequest{Key: fmt.Sprintf("k%d", i), ExpectVersion: sdk.AnyVersion}))
		if _, err := fast.Recv(); err != nil {
			t.Fatalf("fast watcher: %v", err)
		}
	}
	for i := range 3 {
		ev, err := w.Recv()
		if err != nil || ev.Revision != revs[i] {
			t.Fatalf("buffered event %d = %+v, %v; want revision %d", i, ev, err, revs[i])
		}
	}
	if _, err := w.Recv(); !errors.Is(err, sdk.ErrWatchOverflow) {
		t.Fatalf("after the buffer: err = %v, want ErrWatchOverflow", err)
	}
	// Re-watching from the last revision seen resumes without a gap.
	w2, err := s.Watch(ctx, &sdk.WatchRequest{Prefix: "k", FromRevision: revs[2]})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	for i := 3; i < 6; i++ {
		ev, err := w2.Recv()
		if err != nil || ev.Revision != revs[i] {
			t.Fatalf("resumed event %d = %+v, %v; want revision %d", i, ev, err, revs[i])
		}
	}
}

func TestValueTooLarge(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "meta.db"), Options{MaxValueBytes: 8})
	_, err := s.Put(t.Context(), &sdk.PutRequest{Key: "k", Value: make([]byte, 9), ExpectVersion: sdk.AnyVersion})
	if !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("oversized value: err = %v, want ErrInvalidArgument", err)
	}
}

// TestLargeWriteFitsWatchBuffer: the watch buffer counts writes, so one
// Txn of many more keys than the buffer (a topic of 10,000 partitions is
// one write) reaches a watcher that keeps up, whole and in order.
func TestLargeWriteFitsWatchBuffer(t *testing.T) {
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "meta.db"), Options{WatchBuffer: 3})
	const writes, keys = 3, 100
	// Two watchers share each write's events while the writes go on.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		w, err := s.Watch(ctx, &sdk.WatchRequest{Prefix: "/p/"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		wg.Go(func() {
			for i := range writes * keys {
				ev, err := w.Recv()
				if err != nil {
					errs <- fmt.Errorf("event %d: %w", i, err)
					return
				}
				if want := fmt.Sprintf("/p/%d/%03d", i/keys, i%keys); ev.Key != want {
					errs <- fmt.Errorf("event %d is %s, want %s", i, ev.Key, want)
					return
				}
			}
		})
	}
	for n := range writes {
		var ops []sdk.Op
		for i := range keys {
			ops = append(ops, sdk.Op{Type: sdk.OpPut, Key: fmt.Sprintf("/p/%d/%03d", n, i), Value: []byte("v")})
		}
		if _, err := s.Txn(ctx, &sdk.TxnRequest{Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func mustPut(t *testing.T, s *Store, req *sdk.PutRequest) int64 {
	t.Helper()
	resp, err := s.Put(context.Background(), req)
	if err != nil {
		t.Fatalf("Put(%q): %v", req.Key, err)
	}
	return resp.Version
}
