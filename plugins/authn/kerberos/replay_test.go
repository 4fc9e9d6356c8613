package kerberos

import (
	"testing"
	"time"
)

func TestReplaysWindow(t *testing.T) {
	var r replays
	t0 := time.Unix(1000, 0)
	if !r.first([]byte("a"), t0, time.Minute) {
		t.Fatal("a new authenticator was called a replay")
	}
	if r.first([]byte("a"), t0.Add(59*time.Second), time.Minute) {
		t.Fatal("a replay within the window was accepted")
	}
	if !r.first([]byte("b"), t0.Add(59*time.Second), time.Minute) {
		t.Fatal("a different authenticator was called a replay")
	}
	// After the window "a" is forgotten (its time check would refuse it).
	if !r.first([]byte("a"), t0.Add(61*time.Second), time.Minute) {
		t.Fatal("an authenticator outside the window was still remembered")
	}
	if len(r.seen) != 2 || len(r.queue) != 2 {
		t.Fatalf("%d remembered, %d queued; want 2 and 2 (b and the new a)", len(r.seen), len(r.queue))
	}
}
