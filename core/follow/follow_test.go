package follow

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
)

// TestPrefixFollowsPutsAndDeletes: the listing, later puts and deletes,
// and values that do not decode (left out) all reach apply; other
// prefixes do not; the goroutine returns when ctx ends.
func TestPrefixFollowsPutsAndDeletes(t *testing.T) {
	st, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	put := func(k, v string) {
		if _, err := st.Put(context.Background(), &sdk.PutRequest{Key: k, Value: []byte(v), ExpectVersion: sdk.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	put("/p/a", "1")
	put("/other/x", "9")
	var mu sync.Mutex
	var seen map[string]int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Prefix(ctx, st, "/p/", "test", slog.New(slog.NewTextHandler(io.Discard, nil)),
			func(_ string, v []byte) (int, error) { return strconv.Atoi(string(v)) },
			func(m map[string]int) {
				c := make(map[string]int, len(m))
				for k, v := range m {
					c[k] = v
				}
				mu.Lock()
				seen = c
				mu.Unlock()
			})
	}()
	want := func(what string, w map[string]int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			ok := len(seen) == len(w)
			for k, v := range w {
				ok = ok && seen[k] == v
			}
			got := seen
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: apply saw %v, want %v", what, got, w)
			}
		}
	}
	want("listing", map[string]int{"/p/a": 1})
	put("/p/b", "2")
	put("/p/bad", "not a number")
	want("put", map[string]int{"/p/a": 1, "/p/b": 2})
	if _, err := st.Delete(context.Background(), &sdk.DeleteRequest{Key: "/p/a", ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatal(err)
	}
	want("delete", map[string]int{"/p/b": 2})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Prefix did not return after ctx ended")
	}
}
