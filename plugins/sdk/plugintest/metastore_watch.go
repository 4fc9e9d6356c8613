package plugintest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/plugins/sdk"
)

// watch starts a watch that ends with the test.
func (h *harness) watch(prefix string, from int64) sdk.WatchStream {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, waitLimit)
	w, err := h.s.Watch(ctx, &sdk.WatchRequest{Prefix: prefix, FromRevision: from})
	if err != nil {
		cancel()
		h.t.Fatalf("Watch(%q, from %d): %v", prefix, from, err)
	}
	h.t.Cleanup(func() { w.Close(); cancel() })
	return w
}

// recv reads n events; a stalled watch fails when its ctx ends.
func (h *harness) recv(w sdk.WatchStream, n int) []sdk.WatchEvent {
	h.t.Helper()
	out := make([]sdk.WatchEvent, 0, n)
	for range n {
		ev, err := w.Recv()
		if err != nil {
			h.t.Fatalf("Recv after %d of %d events: %v", len(out), n, err)
		}
		out = append(out, *ev)
	}
	return out
}

func putEvent(key, value string, rev int64) sdk.WatchEvent {
	return sdk.WatchEvent{Type: sdk.EventPut, Key: key, Value: []byte(value), Version: rev, Revision: rev}
}

func deleteEvent(key string, rev int64) sdk.WatchEvent {
	return sdk.WatchEvent{Type: sdk.EventDelete, Key: key, Revision: rev}
}

// sortWithinRevision orders events that share a revision by key: their
// order among themselves is unspecified by the contract.
func sortWithinRevision(evs []sdk.WatchEvent) {
	slices.SortStableFunc(evs, func(a, b sdk.WatchEvent) int {
		if c := cmp.Compare(a.Revision, b.Revision); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

func (h *harness) expectEvents(what string, got, want []sdk.WatchEvent) {
	h.t.Helper()
	for i := 1; i < len(got); i++ {
		if got[i].Revision < got[i-1].Revision {
			h.t.Fatalf("%s: revision %d after %d: out of order", what, got[i].Revision, got[i-1].Revision)
		}
	}
	sortWithinRevision(got)
	sortWithinRevision(want)
	if diff := gocmp.Diff(want, got); diff != "" {
		h.t.Fatalf("%s: events (-want +got):\n%s", what, diff)
	}
}

func testWatchFromNow(h *harness) {
	h.put("w/before", "x", sdk.AnyVersion)
	w := h.watch("w/", 0)
	v1 := h.put("w/a", "1", sdk.AnyVersion)
	v2 := h.put("w/a", "2", v1)
	v3 := h.put("w/b", "3", sdk.MustNotExist)
	h.expectEvents("watch from now", h.recv(w, 3), []sdk.WatchEvent{
		putEvent("w/a", "1", v1), putEvent("w/a", "2", v2), putEvent("w/b", "3", v3),
	})
}

func testWatchFromRevision(h *harness) {
	var revs []int64
	for i := range 5 {
		revs = append(revs, h.put("w/"+strconv.Itoa(i), "v"+strconv.Itoa(i), sdk.AnyVersion))
	}
	w := h.watch("w/", revs[1]) // changes after the second write
	live1 := h.put("w/5", "v5", sdk.AnyVersion)
	live2 := h.put("w/0", "again", revs[0])
	want := []sdk.WatchEvent{
		putEvent("w/2", "v2", revs[2]), putEvent("w/3", "v3", revs[3]), putEvent("w/4", "v4", revs[4]),
		putEvent("w/5", "v5", live1), putEvent("w/0", "again", live2),
	}
	h.expectEvents("catch-up then live", h.recv(w, len(want)), want)
}

// testWatchUnderLoad starts a watch from a past revision while a writer
// keeps writing: the switch from history to live events must not lose or
// repeat anything.
func testWatchUnderLoad(h *harness) {
	const total, startAfter = 120, 10
	revs := make([]int64, total)
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for i := range total {
			resp, err := h.s.Put(h.ctx, &sdk.PutRequest{Key: fmt.Sprintf("load/%03d", i), Value: []byte("x"), ExpectVersion: sdk.AnyVersion})
			if err != nil {
				errc <- err
				return
			}
			revs[i] = resp.Version
			if i == 2*startAfter {
				close(started)
			}
		}
	}()
	select {
	case <-started:
	case err := <-errc:
		h.t.Fatalf("writer: %v", err)
	}
	w := h.watch("load/", revs[startAfter]) // revs[startAfter] was written before started closed
	got := h.recv(w, total-startAfter-1)
	if err := <-errc; err != nil {
		h.t.Fatalf("writer: %v", err)
	}
	var want []sdk.WatchEvent
	for i := startAfter + 1; i < total; i++ {
		want = append(want, putEvent(fmt.Sprintf("load/%03d", i), "x", revs[i]))
	}
	h.expectEvents("watch under load", got, want)
}

func testWatchPrefix(h *harness) {
	w := h.watch("brokers/", 0)
	h.put("brokers", "no", sdk.AnyVersion)
	h.put("brokersX/1", "no", sdk.AnyVersion)
	h.put("topics/a", "no", sdk.AnyVersion)
	v := h.put("brokers/1", "yes", sdk.AnyVersion)
	h.put("a", "no", sdk.AnyVersion)
	v2 := h.put("brokers/2", "yes", sdk.AnyVersion)
	h.expectEvents("prefix filter", h.recv(w, 2), []sdk.WatchEvent{
		putEvent("brokers/1", "yes", v), putEvent("brokers/2", "yes", v2),
	})
}

func testWatchDeleteAndTxn(h *harness) {
	vx := h.put("t/x", "x", sdk.AnyVersion)
	w := h.watch("t/", 0)
	rd := h.del("t/x", vx)
	resp, err := h.s.Txn(h.ctx, &sdk.TxnRequest{Ops: []sdk.Op{
		{Type: sdk.OpPut, Key: "t/b", Value: []byte("b")},
		{Type: sdk.OpPut, Key: "t/a", Value: []byte("a")},
		{Type: sdk.OpPut, Key: "other", Value: []byte("o")},
	}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.expectEvents("delete and txn", h.recv(w, 3), []sdk.WatchEvent{
		deleteEvent("t/x", rd), putEvent("t/a", "a", resp.Revision), putEvent("t/b", "b", resp.Revision),
	})
}

func testWatchCompacted(h *harness) {
	c, ok := h.s.(sdk.Compactor)
	if !ok {
		h.t.Skip("store does not implement sdk.Compactor")
	}
	v1 := h.put("c/1", "1", sdk.AnyVersion)
	v2 := h.put("c/2", "2", sdk.AnyVersion)
	v3 := h.put("c/3", "3", sdk.AnyVersion)
	if _, err := c.Compact(h.ctx, &sdk.CompactRequest{Revision: v2}); err != nil {
		h.t.Fatalf("Compact(%d): %v", v2, err)
	}
	ws, err := h.s.Watch(h.ctx, &sdk.WatchRequest{Prefix: "c/", FromRevision: v1})
	if err == nil { // the contract allows reporting it from the first Recv
		_, err = ws.Recv()
		ws.Close()
	}
	expectErr(h.t, "watch from before the compaction point", err, sdk.ErrCompacted)
	w := h.watch("c/", v2)
	h.expectEvents("watch from the compaction point", h.recv(w, 1), []sdk.WatchEvent{putEvent("c/3", "3", v3)})
}

func testWatchClose(h *harness) {
	w := h.watch("k", 0)
	done := make(chan error, 1)
	go func() {
		_, err := w.Recv()
		done <- err
	}()
	w.Close()
	expectErr(h.t, "Recv blocked during Close", <-done, sdk.ErrClosed)
	_, err := w.Recv()
	expectErr(h.t, "Recv after Close", err, sdk.ErrClosed)
	if err := w.Close(); err != nil {
		h.t.Fatalf("second Close: %v", err)
	}

	ctx, cancel := context.WithCancel(h.ctx)
	w2, err := h.s.Watch(ctx, &sdk.WatchRequest{Prefix: "k"})
	if err != nil {
		h.t.Fatal(err)
	}
	defer w2.Close()
	cancel()
	if _, err := w2.Recv(); !errors.Is(err, context.Canceled) {
		h.t.Fatalf("Recv after ctx cancel: err = %v, want context.Canceled", err)
	}
}
