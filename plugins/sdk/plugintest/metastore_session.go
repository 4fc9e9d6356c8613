package plugintest

import (
	"errors"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// shortTTL is the TTL of sessions meant to expire during a test.
const shortTTL = 200 * time.Millisecond

func (h *harness) grant(ttl time.Duration) sdk.SessionID {
	h.t.Helper()
	resp, err := h.s.GrantSession(h.ctx, &sdk.GrantSessionRequest{TTL: ttl})
	if err != nil {
		h.t.Fatalf("GrantSession(%v): %v", ttl, err)
	}
	if resp.ID == sdk.NoSession || resp.TTL < ttl {
		h.t.Fatalf("GrantSession(%v) = %+v: want an ID and a TTL >= the request", ttl, resp)
	}
	return resp.ID
}

func (h *harness) putEphemeral(key, value string, id sdk.SessionID) int64 {
	h.t.Helper()
	resp, err := h.s.Put(h.ctx, &sdk.PutRequest{Key: key, Value: []byte(value), ExpectVersion: sdk.AnyVersion, Session: id})
	if err != nil {
		h.t.Fatalf("Put(%q, session %d): %v", key, id, err)
	}
	if got := h.get(key); got.Session != id {
		h.t.Fatalf("Get(%q).Session = %d, want %d", key, got.Session, id)
	}
	return resp.Version
}

// waitGone polls until key no longer exists.
func (h *harness) waitGone(key string) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		_, err := h.s.Get(h.ctx, &sdk.GetRequest{Key: key})
		if errors.Is(err, sdk.ErrNotFound) {
			return
		}
		if err != nil {
			h.t.Fatalf("Get(%q): %v", key, err)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%q still exists %v after its session should have expired", key, waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectEnded checks that the session can no longer be used.
func (h *harness) expectEnded(id sdk.SessionID) {
	h.t.Helper()
	_, err := h.s.KeepAlive(h.ctx, &sdk.KeepAliveRequest{ID: id})
	expectErr(h.t, "KeepAlive of an ended session", err, sdk.ErrSessionExpired)
	_, err = h.s.Put(h.ctx, &sdk.PutRequest{Key: "late", Value: []byte("x"), ExpectVersion: sdk.AnyVersion, Session: id})
	expectErr(h.t, "Put with an ended session", err, sdk.ErrSessionExpired)
	h.expectGone("late")
	_, err = h.s.RevokeSession(h.ctx, &sdk.RevokeSessionRequest{ID: id})
	expectErr(h.t, "RevokeSession of an ended session", err, sdk.ErrSessionExpired)
}

// expectSessionDeletes reads the delete events of a session end: one
// revision for all of the session's keys.
func (h *harness) expectSessionDeletes(w sdk.WatchStream, keys ...string) {
	h.t.Helper()
	got := h.recv(w, len(keys))
	want := make([]sdk.WatchEvent, len(keys))
	for i, k := range keys {
		want[i] = deleteEvent(k, got[0].Revision)
	}
	h.expectEvents("session end", got, want)
}

func testSessionExpiry(h *harness) {
	id := h.grant(shortTTL)
	h.putEphemeral("eph/a", "a", id)
	h.putEphemeral("eph/b", "b", id)
	vp := h.put("eph/p", "persistent", sdk.AnyVersion)
	w := h.watch("eph/", 0)
	h.waitGone("eph/a")
	h.expectGone("eph/b")
	h.expectSessionDeletes(w, "eph/a", "eph/b")
	h.expectValue("eph/p", "persistent", vp)
	h.expectEnded(id)
}

func testSessionRevoke(h *harness) {
	id := h.grant(time.Minute)
	other := h.grant(time.Minute)
	h.putEphemeral("eph/a", "a", id)
	h.putEphemeral("eph/b", "b", id)
	vo := h.putEphemeral("eph/other", "o", other)
	w := h.watch("eph/", 0)
	if _, err := h.s.RevokeSession(h.ctx, &sdk.RevokeSessionRequest{ID: id}); err != nil {
		h.t.Fatalf("RevokeSession: %v", err)
	}
	h.expectGone("eph/a") // gone when RevokeSession returns, no waiting
	h.expectGone("eph/b")
	h.expectSessionDeletes(w, "eph/a", "eph/b")
	h.expectEnded(id)
	if got := h.get("eph/other"); got.Version != vo || got.Session != other {
		h.t.Fatalf("other session's key = %+v, want version %d session %d", got, vo, other)
	}
	// A session without keys ends without a write.
	empty := h.grant(time.Minute)
	before := h.list("").Revision
	if _, err := h.s.RevokeSession(h.ctx, &sdk.RevokeSessionRequest{ID: empty}); err != nil {
		h.t.Fatalf("RevokeSession of a session without keys: %v", err)
	}
	if after := h.list("").Revision; after != before {
		h.t.Fatalf("revoking a session without keys moved the revision %d → %d", before, after)
	}
}

func testSessionKeepAlive(h *harness) {
	// A TTL well above the keep-alive period, so a loaded machine does
	// not let the session lapse between two keep-alives.
	const ttl, period, span = 500 * time.Millisecond, 50 * time.Millisecond, 1500 * time.Millisecond
	id := h.grant(ttl)
	v := h.putEphemeral("eph/kept", "k", id)
	for end := time.Now().Add(span); time.Now().Before(end); {
		resp, err := h.s.KeepAlive(h.ctx, &sdk.KeepAliveRequest{ID: id})
		if err != nil {
			h.t.Fatalf("KeepAlive: %v", err)
		}
		if resp.TTL < ttl {
			h.t.Fatalf("KeepAlive TTL %v, want >= %v", resp.TTL, ttl)
		}
		time.Sleep(period)
	}
	h.expectValue("eph/kept", "k", v) // alive three TTLs later
	h.waitGone("eph/kept")            // and ends once keep-alives stop
	h.expectEnded(id)
}

// testSessionHandover: the last Put decides who owns a key.
func testSessionHandover(h *harness) {
	id := h.grant(time.Minute)
	h.putEphemeral("k/persist", "e", id)
	vp := h.put("k/persist", "p", sdk.AnyVersion) // now persistent
	h.put("k/eph", "p", sdk.MustNotExist)
	h.putEphemeral("k/eph", "e", id) // now ephemeral
	if _, err := h.s.RevokeSession(h.ctx, &sdk.RevokeSessionRequest{ID: id}); err != nil {
		h.t.Fatal(err)
	}
	h.expectValue("k/persist", "p", vp)
	h.expectGone("k/eph")
}

func testClose(h *harness) {
	h.put("k", "v", sdk.AnyVersion)
	w := h.watch("", 0)
	if err := h.s.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	_, err := w.Recv()
	expectErr(h.t, "Recv on a closed store", err, sdk.ErrClosed)
	_, err = h.s.Get(h.ctx, &sdk.GetRequest{Key: "k"})
	expectErr(h.t, "Get after Close", err, sdk.ErrClosed)
	expectErr(h.t, "Put after Close", h.putErr("k", "w", sdk.AnyVersion), sdk.ErrClosed)
	_, err = h.s.Watch(h.ctx, &sdk.WatchRequest{})
	expectErr(h.t, "Watch after Close", err, sdk.ErrClosed)
	_, err = h.s.GrantSession(h.ctx, &sdk.GrantSessionRequest{TTL: time.Second})
	expectErr(h.t, "GrantSession after Close", err, sdk.ErrClosed)
	if err := h.s.Close(); err != nil {
		h.t.Fatalf("second Close: %v", err)
	}
}
