package plugintest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/plugins/sdk"
)

// waitLimit bounds every wait in these tests: Recv on a watch, polling for
// a session to end. Reaching it is a failure, not a timing assertion.
const waitLimit = 15 * time.Second

// MetadataStore runs the sdk.MetadataStore contract tests as parallel
// subtests. open is called once per subtest and must return an empty
// store, registering its own cleanup (Close may be called again by a
// test; stores must allow that).
//
// Watch tests need a store that buffers at least 200 events per watcher
// and retains at least 100 events of history. The compaction test runs
// only for stores that implement sdk.Compactor and is skipped otherwise.
func MetadataStore(t *testing.T, open func(t *testing.T) sdk.MetadataStore) {
	tests := []struct {
		name string
		fn   func(h *harness)
	}{
		{"Basics", testBasics},
		{"ListSortedAndPrefixBounded", testList},
		{"PutCompareAndSet", testPutCAS},
		{"DeleteCompareAndSet", testDeleteCAS},
		{"InvalidArguments", testInvalid},
		{"TxnAllOrNothing", testTxn},
		{"RevisionsIncrease", testRevisions},
		{"ConcurrentCASNoLostUpdate", testConcurrentCAS},
		{"WatchFromNow", testWatchFromNow},
		{"WatchFromRevision", testWatchFromRevision},
		{"WatchCatchUpUnderLoad", testWatchUnderLoad},
		{"WatchPrefix", testWatchPrefix},
		{"WatchDeleteAndTxnEvents", testWatchDeleteAndTxn},
		{"WatchCompacted", testWatchCompacted},
		{"WatchCloseAndCancel", testWatchClose},
		{"SessionExpiry", testSessionExpiry},
		{"SessionRevoke", testSessionRevoke},
		{"SessionKeepAlive", testSessionKeepAlive},
		{"SessionKeyHandover", testSessionHandover},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*waitLimit)
			defer cancel()
			tc.fn(&harness{t: t, s: open(t), ctx: ctx})
		})
	}
}

// harness wraps a store with helpers that fail the test on error.
type harness struct {
	t   *testing.T
	s   sdk.MetadataStore
	ctx context.Context
}

func (h *harness) put(key, value string, expect int64) int64 {
	h.t.Helper()
	resp, err := h.s.Put(h.ctx, &sdk.PutRequest{Key: key, Value: []byte(value), ExpectVersion: expect})
	if err != nil {
		h.t.Fatalf("Put(%q, expect %d): %v", key, expect, err)
	}
	return resp.Version
}

func (h *harness) putErr(key, value string, expect int64) error {
	_, err := h.s.Put(h.ctx, &sdk.PutRequest{Key: key, Value: []byte(value), ExpectVersion: expect})
	return err
}

func (h *harness) get(key string) *sdk.GetResponse {
	h.t.Helper()
	resp, err := h.s.Get(h.ctx, &sdk.GetRequest{Key: key})
	if err != nil {
		h.t.Fatalf("Get(%q): %v", key, err)
	}
	return resp
}

func (h *harness) del(key string, expect int64) int64 {
	h.t.Helper()
	resp, err := h.s.Delete(h.ctx, &sdk.DeleteRequest{Key: key, ExpectVersion: expect})
	if err != nil {
		h.t.Fatalf("Delete(%q, expect %d): %v", key, expect, err)
	}
	return resp.Revision
}

func (h *harness) list(prefix string) *sdk.ListResponse {
	h.t.Helper()
	resp, err := h.s.List(h.ctx, &sdk.ListRequest{Prefix: prefix})
	if err != nil {
		h.t.Fatalf("List(%q): %v", prefix, err)
	}
	return resp
}

// expectGone checks that key does not exist.
func (h *harness) expectGone(key string) {
	h.t.Helper()
	if _, err := h.s.Get(h.ctx, &sdk.GetRequest{Key: key}); !errors.Is(err, sdk.ErrNotFound) {
		h.t.Fatalf("Get(%q) = %v, want ErrNotFound", key, err)
	}
}

// expectValue checks key's value and version.
func (h *harness) expectValue(key, value string, version int64) {
	h.t.Helper()
	got := h.get(key)
	if string(got.Value) != value || got.Version != version {
		h.t.Fatalf("Get(%q) = %q@%d, want %q@%d", key, got.Value, got.Version, value, version)
	}
}

func expectErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func testBasics(h *harness) {
	h.expectGone("a")
	v1 := h.put("a", "one", sdk.AnyVersion)
	if v1 <= 0 {
		h.t.Fatalf("first version %d, want > 0", v1)
	}
	h.expectValue("a", "one", v1)
	if got := h.get("a"); got.Key != "a" || got.Session != sdk.NoSession || got.Revision < v1 {
		h.t.Fatalf("Get = %+v, want key a, no session, revision >= %d", got, v1)
	}
	v2 := h.put("a", "two", sdk.AnyVersion)
	if v2 <= v1 {
		h.t.Fatalf("overwrite version %d, want > %d", v2, v1)
	}
	h.expectValue("a", "two", v2)
	h.put("empty", "", sdk.AnyVersion)
	if got := h.get("empty"); len(got.Value) != 0 {
		h.t.Fatalf("empty value read back as %q", got.Value)
	}
	if rev := h.del("a", sdk.AnyVersion); rev <= v2 {
		h.t.Fatalf("delete revision %d, want > %d", rev, v2)
	}
	h.expectGone("a")
	_, err := h.s.Delete(h.ctx, &sdk.DeleteRequest{Key: "a", ExpectVersion: sdk.AnyVersion})
	expectErr(h.t, "Delete of a missing key", err, sdk.ErrNotFound)
	v3 := h.put("a", "three", sdk.MustNotExist)
	h.expectValue("a", "three", v3)
}

func testList(h *harness) {
	keys := []string{"t/b", "t/a/2", "t/a/10", "t/a", "t", "t0", "s", "t/a/1", "u/x"}
	vers := make(map[string]int64)
	for _, k := range keys {
		vers[k] = h.put(k, "v-"+k, sdk.MustNotExist)
	}
	kvs := func(ks ...string) []sdk.KeyValue {
		out := []sdk.KeyValue{}
		for _, k := range ks {
			out = append(out, sdk.KeyValue{Key: k, Value: []byte("v-" + k), Version: vers[k]})
		}
		return out
	}
	for _, tc := range []struct {
		prefix string
		want   []sdk.KeyValue
	}{
		{"t/", kvs("t/a", "t/a/1", "t/a/10", "t/a/2", "t/b")},
		{"t/a/", kvs("t/a/1", "t/a/10", "t/a/2")},
		{"t", kvs("t", "t/a", "t/a/1", "t/a/10", "t/a/2", "t/b", "t0")},
		{"", kvs("s", "t", "t/a", "t/a/1", "t/a/10", "t/a/2", "t/b", "t0", "u/x")},
		{"v", kvs()},
	} {
		got := h.list(tc.prefix)
		if diff := cmp.Diff(tc.want, nonNil(got.KVs)); diff != "" {
			h.t.Errorf("List(%q) (-want +got):\n%s", tc.prefix, diff)
		}
		if got.Revision < vers["u/x"] {
			h.t.Errorf("List(%q).Revision = %d, want >= last write %d", tc.prefix, got.Revision, vers["u/x"])
		}
	}
}

func nonNil(kvs []sdk.KeyValue) []sdk.KeyValue {
	if kvs == nil {
		return []sdk.KeyValue{}
	}
	for i := range kvs {
		if kvs[i].Value == nil {
			kvs[i].Value = []byte{}
		}
	}
	return kvs
}

func testPutCAS(h *harness) {
	expectErr(h.t, "Put with version 5 on a missing key", h.putErr("k", "x", 5), sdk.ErrVersionMismatch)
	h.expectGone("k")
	v1 := h.put("k", "one", sdk.MustNotExist)
	expectErr(h.t, "create-only Put of an existing key", h.putErr("k", "again", sdk.MustNotExist), sdk.ErrVersionMismatch)
	h.expectValue("k", "one", v1)
	expectErr(h.t, "Put with a stale version", h.putErr("k", "bad", v1+1000), sdk.ErrVersionMismatch)
	h.expectValue("k", "one", v1)
	v2 := h.put("k", "two", v1)
	h.expectValue("k", "two", v2)
	expectErr(h.t, "Put with the replaced version", h.putErr("k", "bad", v1), sdk.ErrVersionMismatch)
	h.expectValue("k", "two", v2)
}

func testDeleteCAS(h *harness) {
	_, err := h.s.Delete(h.ctx, &sdk.DeleteRequest{Key: "k", ExpectVersion: 7})
	expectErr(h.t, "Delete with version 7 of a missing key", err, sdk.ErrVersionMismatch)
	v1 := h.put("k", "one", sdk.MustNotExist)
	v2 := h.put("k", "two", v1)
	_, err = h.s.Delete(h.ctx, &sdk.DeleteRequest{Key: "k", ExpectVersion: v1})
	expectErr(h.t, "Delete with a stale version", err, sdk.ErrVersionMismatch)
	h.expectValue("k", "two", v2)
	h.del("k", v2)
	h.expectGone("k")
}

func testInvalid(h *harness) {
	_, err := h.s.Get(h.ctx, &sdk.GetRequest{Key: ""})
	expectErr(h.t, "Get of an empty key", err, sdk.ErrInvalidArgument)
	expectErr(h.t, "Put of an empty key", h.putErr("", "x", sdk.AnyVersion), sdk.ErrInvalidArgument)
	expectErr(h.t, "Put with ExpectVersion -2", h.putErr("k", "x", -2), sdk.ErrInvalidArgument)
	h.put("k", "x", sdk.AnyVersion)
	_, err = h.s.Delete(h.ctx, &sdk.DeleteRequest{Key: "k", ExpectVersion: sdk.MustNotExist})
	expectErr(h.t, "Delete with MustNotExist", err, sdk.ErrInvalidArgument)
	_, err = h.s.Txn(h.ctx, &sdk.TxnRequest{Ops: []sdk.Op{
		{Type: sdk.OpPut, Key: "d", Value: []byte("1")},
		{Type: sdk.OpDelete, Key: "d"},
	}})
	expectErr(h.t, "Txn naming a key twice", err, sdk.ErrInvalidArgument)
	h.expectGone("d")
	_, err = h.s.GrantSession(h.ctx, &sdk.GrantSessionRequest{TTL: 0})
	expectErr(h.t, "GrantSession with TTL 0", err, sdk.ErrInvalidArgument)
	_, err = h.s.Watch(h.ctx, &sdk.WatchRequest{FromRevision: -1})
	expectErr(h.t, "Watch from revision -1", err, sdk.ErrInvalidArgument)
}

func testTxn(h *harness) {
	vOld := h.put("old", "x", sdk.MustNotExist)
	vGuard := h.put("guard", "g", sdk.MustNotExist)

	// A false condition among true ones: nothing is applied.
	_, err := h.s.Txn(h.ctx, &sdk.TxnRequest{
		Conditions: []sdk.Condition{{Key: "guard", Version: vGuard}, {Key: "topic/a", Version: sdk.MustNotExist}, {Key: "old", Version: vOld + 1}},
		Ops: []sdk.Op{
			{Type: sdk.OpPut, Key: "topic/a", Value: []byte("cfg")},
			{Type: sdk.OpPut, Key: "topic/a/p/0", Value: []byte("p0")},
			{Type: sdk.OpDelete, Key: "old"},
		},
	})
	expectErr(h.t, "Txn with a false condition", err, sdk.ErrVersionMismatch)
	h.expectGone("topic/a")
	h.expectGone("topic/a/p/0")
	h.expectValue("old", "x", vOld)

	// All conditions true: everything at one revision.
	resp, err := h.s.Txn(h.ctx, &sdk.TxnRequest{
		Conditions: []sdk.Condition{{Key: "guard", Version: vGuard}, {Key: "topic/a", Version: sdk.MustNotExist}, {Key: "old", Version: vOld}},
		Ops: []sdk.Op{
			{Type: sdk.OpPut, Key: "topic/a", Value: []byte("cfg")},
			{Type: sdk.OpPut, Key: "topic/a/p/0", Value: []byte("p0")},
			{Type: sdk.OpDelete, Key: "old"},
			{Type: sdk.OpDelete, Key: "never-existed"},
		},
	})
	if err != nil {
		h.t.Fatalf("Txn: %v", err)
	}
	if resp.Revision <= vGuard {
		h.t.Fatalf("Txn revision %d, want > %d", resp.Revision, vGuard)
	}
	h.expectValue("topic/a", "cfg", resp.Revision)
	h.expectValue("topic/a/p/0", "p0", resp.Revision)
	h.expectGone("old")
	h.expectValue("guard", "g", vGuard)
	if next := h.put("after", "x", sdk.AnyVersion); next <= resp.Revision {
		h.t.Fatalf("write after Txn got version %d, want > %d", next, resp.Revision)
	}

	// Running the same create again fails: the topic exists.
	_, err = h.s.Txn(h.ctx, &sdk.TxnRequest{
		Conditions: []sdk.Condition{{Key: "topic/a", Version: sdk.MustNotExist}},
		Ops:        []sdk.Op{{Type: sdk.OpPut, Key: "topic/a", Value: []byte("other")}},
	})
	expectErr(h.t, "second create Txn", err, sdk.ErrVersionMismatch)
	h.expectValue("topic/a", "cfg", resp.Revision)
}

func testRevisions(h *harness) {
	last := int64(0)
	check := func(what string, rev int64) {
		h.t.Helper()
		if rev <= last {
			h.t.Fatalf("%s: revision %d after %d, want strictly increasing", what, rev, last)
		}
		last = rev
	}
	for i := range 5 {
		check("Put", h.put("k"+strconv.Itoa(i), "v", sdk.AnyVersion))
	}
	check("Put overwrite", h.put("k0", "w", sdk.AnyVersion))
	check("Delete", h.del("k1", sdk.AnyVersion))
	resp, err := h.s.Txn(h.ctx, &sdk.TxnRequest{Ops: []sdk.Op{{Type: sdk.OpPut, Key: "k9", Value: []byte("t")}}})
	if err != nil {
		h.t.Fatal(err)
	}
	check("Txn", resp.Revision)
	// A failed write consumes nothing visible: the listing still reflects
	// the last successful write at most.
	expectErr(h.t, "failed Put", h.putErr("k0", "x", sdk.MustNotExist), sdk.ErrVersionMismatch)
	if rev := h.list("").Revision; rev < last {
		h.t.Fatalf("List revision %d below last write %d", rev, last)
	}
	check("Put after failure", h.put("k0", "y", sdk.AnyVersion))
}

// testConcurrentCAS runs read-modify-write increments from several
// goroutines. Compare-and-set must let exactly one writer win per version:
// the winners form one chain and the counter counts every success.
func testConcurrentCAS(h *harness) {
	const workers, perWorker = 8, 5
	type win struct{ base, next int64 }
	var (
		mu   sync.Mutex
		wins []win
		wg   sync.WaitGroup
	)
	base := h.put("counter", "0", sdk.MustNotExist)
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for done := 0; done < perWorker; {
				cur, err := h.s.Get(h.ctx, &sdk.GetRequest{Key: "counter"})
				if err != nil {
					errc <- err
					return
				}
				n, _ := strconv.Atoi(string(cur.Value))
				resp, err := h.s.Put(h.ctx, &sdk.PutRequest{Key: "counter", Value: []byte(strconv.Itoa(n + 1)), ExpectVersion: cur.Version})
				if errors.Is(err, sdk.ErrVersionMismatch) {
					continue
				}
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				wins = append(wins, win{cur.Version, resp.Version})
				mu.Unlock()
				done++
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		h.t.Fatalf("increment: %v", err)
	}
	if len(wins) != workers*perWorker {
		h.t.Fatalf("%d successful increments, want %d", len(wins), workers*perWorker)
	}
	byBase := make(map[int64]int64)
	for _, w := range wins {
		if _, dup := byBase[w.base]; dup {
			h.t.Fatalf("two writes succeeded from version %d: lost update", w.base)
		}
		byBase[w.base] = w.next
	}
	v := base
	for range wins { // follow the chain from the first version
		next, ok := byBase[v]
		if !ok {
			h.t.Fatalf("version chain broken at %d", v)
		}
		v = next
	}
	h.expectValue("counter", strconv.Itoa(workers*perWorker), v)
}
