package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// putRetrying writes through s, retrying the failures a leader change
// may cause (outcome unknown); it returns the version that stuck.
func putRetrying(t *testing.T, s sdk.MetadataStore, key, value string) int64 {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := s.Put(ctxT(t), &sdk.PutRequest{Key: key, Value: []byte(value), ExpectVersion: sdk.AnyVersion})
		if err == nil {
			return resp.Version
		}
		if !errors.Is(err, sdk.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Put(%q): %v", key, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadYourWritesAcrossNodes: a write through one node is visible at
// once through every other node.
func TestReadYourWritesAcrossNodes(t *testing.T) {
	c := openCluster(t, 3)
	fs := c.followers()
	stores := []*Store{c.leader(), fs[0], fs[1]}
	for i := range 30 {
		w := stores[i%3]
		key := fmt.Sprintf("k/%d", i)
		v := mustPut(t, w, key, "v", sdk.NoSession)
		for _, r := range stores {
			if got := mustGet(t, r, key); got.Version != v {
				t.Fatalf("node %d read %q at version %d right after the write at %d", r.cfg.NodeID, key, got.Version, v)
			}
		}
	}
}

// TestWritesContinueWithoutOneVoter closes a follower, then the leader of
// a fresh cluster: two of three voters keep serving writes.
func TestWritesContinueWithoutOneVoter(t *testing.T) {
	t.Run("follower", func(t *testing.T) {
		c := openCluster(t, 3)
		v0 := mustPut(t, c.leader(), "before", "x", sdk.NoSession)
		fs := c.followers()
		c.stop(fs[0].cfg.NodeID)
		for _, s := range []*Store{c.leader(), fs[1]} {
			v := mustPut(t, s, fmt.Sprintf("after/%d", s.cfg.NodeID), "y", sdk.NoSession)
			if v <= v0 {
				t.Fatalf("write after losing a voter got version %d, want > %d", v, v0)
			}
		}
		if got := mustGet(t, fs[1], "before"); got.Version != v0 {
			t.Fatalf("before = version %d, want %d", got.Version, v0)
		}
	})
	t.Run("leader", func(t *testing.T) {
		c := openCluster(t, 3)
		old := c.leader()
		v0 := mustPut(t, old, "before", "x", sdk.NoSession)
		survivor := c.followers()[0]
		c.stop(old.cfg.NodeID)
		v := putRetrying(t, survivor, "after", "y")
		if v <= v0 {
			t.Fatalf("write after the leader left got version %d, want > %d", v, v0)
		}
		lead := c.leader()
		if lead.cfg.NodeID == old.cfg.NodeID {
			t.Fatal("the closed node still leads")
		}
		if got := mustGet(t, survivor, "before"); got.Version != v0 {
			t.Fatalf("before = version %d, want %d", got.Version, v0)
		}
	})
}

// TestSessionSurvivesLeaderChange: an ephemeral key stays while its owner
// keeps alive across a leader change, and goes once it stops.
func TestSessionSurvivesLeaderChange(t *testing.T) {
	c := openCluster(t, 3)
	client := c.followers()[0] // the owner's broker; not the leader we stop
	// A session lives one TTL past its last applied keep-alive, across
	// leader changes too: the TTL must outlast an election on a loaded
	// machine (and under -race).
	const ttl = 3 * time.Second
	g, err := client.GrantSession(ctxT(t), &sdk.GrantSessionRequest{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	v := mustPut(t, client, "brokers/1", "alive", g.ID)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 5):
			}
			_, err := client.KeepAlive(ctxT(t), &sdk.KeepAliveRequest{ID: g.ID})
			if err != nil && !errors.Is(err, sdk.ErrUnavailable) { // no leader for a moment: try again
				errc <- err
				return
			}
		}
	})
	old := c.leader()
	c.stop(old.cfg.NodeID)
	lead := c.leader()
	// Let several TTLs pass under the new leader while keep-alives flow.
	putRetrying(t, client, "tick", "0")
	time.Sleep(3 * ttl)
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatalf("KeepAlive across the leader change: %v", err)
	default:
	}
	if got := mustGet(t, lead, "brokers/1"); got.Version != v || got.Session != g.ID {
		t.Fatalf("ephemeral key after leader change = %+v, want version %d session %d", got, v, g.ID)
	}
	waitGone(t, client, "brokers/1") // keep-alives stopped: the new leader expires it
	_, err = client.KeepAlive(ctxT(t), &sdk.KeepAliveRequest{ID: g.ID})
	if !errors.Is(err, sdk.ErrSessionExpired) {
		t.Fatalf("KeepAlive after expiry: %v, want ErrSessionExpired", err)
	}
}

// TestFullRestart closes all three voters and reopens them on the same
// data dirs, with snapshots taken along the way: data, versions, the
// revision and live sessions survive.
func TestFullRestart(t *testing.T) {
	c := newCluster(t, 3)
	c.tune = func(cfg *Config) {
		cfg.SnapshotThreshold = 16
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.TrailingLogs = 4
	}
	for id := range c.voters {
		c.open(id)
	}
	lead := c.leader()
	want := map[string]int64{}
	for i := range 60 {
		key := fmt.Sprintf("topics/t%02d", i)
		want[key] = putRetrying(t, lead, key, "cfg-"+key) // the snapshots may move leadership
	}
	g, err := lead.GrantSession(ctxT(t), &sdk.GrantSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want["brokers/1"] = mustPut(t, lead, "brokers/1", "cfg-brokers/1", g.ID)
	before, err := lead.List(ctxT(t), &sdk.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for a snapshot to exist on some node, so restore is exercised.
	deadline := time.Now().Add(waitLimit)
	for lead.Raft().Stats()["last_snapshot_index"] == "0" {
		if time.Now().After(deadline) {
			t.Fatal("no snapshot taken")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.closeAll()

	for _, id := range []int32{3, 1, 2} { // another order than before
		c.open(id)
	}
	s := c.followers()[0]
	got, err := s.List(ctxT(t), &sdk.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.KVs) != len(want) {
		t.Fatalf("after restart %d keys, want %d", len(got.KVs), len(want))
	}
	for _, kv := range got.KVs {
		if want[kv.Key] != kv.Version || string(kv.Value) != "cfg-"+kv.Key {
			t.Fatalf("after restart %q = %q@%d, want version %d", kv.Key, kv.Value, kv.Version, want[kv.Key])
		}
	}
	if got.Revision < before.Revision {
		t.Fatalf("revision after restart %d, before %d", got.Revision, before.Revision)
	}
	if _, err := s.KeepAlive(ctxT(t), &sdk.KeepAliveRequest{ID: g.ID}); err != nil {
		t.Fatalf("KeepAlive of a session from before the restart: %v", err)
	}
	if v := mustPut(t, s, "after", "x", sdk.NoSession); v <= before.Revision {
		t.Fatalf("write after restart got version %d, want > %d", v, before.Revision)
	}
}

// TestWatchOnFollower: a follower's watch sees every change, written
// through any node, once and in revision order, the same as the leader's.
func TestWatchOnFollower(t *testing.T) {
	c := openCluster(t, 3)
	lead := c.leader()
	fs := c.followers()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	wf, err := fs[0].Watch(ctx, &sdk.WatchRequest{Prefix: "w/"})
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	wl, err := lead.Watch(ctx, &sdk.WatchRequest{Prefix: "w/"})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()

	const perWriter = 40
	writers := []*Store{lead, fs[0], fs[1]}
	revs := make(chan int64, perWriter*len(writers))
	var wg sync.WaitGroup
	for i, w := range writers {
		wg.Go(func() {
			for j := range perWriter {
				resp, err := w.Put(ctx, &sdk.PutRequest{Key: fmt.Sprintf("w/%d/%d", i, j%5), Value: []byte{byte(j)}, ExpectVersion: sdk.AnyVersion})
				if err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				revs <- resp.Version
			}
		})
	}
	wg.Wait()
	close(revs)
	written := map[int64]bool{}
	for r := range revs {
		written[r] = true
	}
	if len(written) != perWriter*len(writers) {
		t.Fatalf("%d distinct revisions for %d writes", len(written), perWriter*len(writers))
	}
	recvAll := func(w sdk.WatchStream) []sdk.WatchEvent {
		var out []sdk.WatchEvent
		for range written {
			ev, err := w.Recv()
			if err != nil {
				t.Fatalf("Recv after %d events: %v", len(out), err)
			}
			out = append(out, *ev)
		}
		return out
	}
	onFollower, onLeader := recvAll(wf), recvAll(wl)
	for i, ev := range onFollower {
		if i > 0 && ev.Revision <= onFollower[i-1].Revision {
			t.Fatalf("follower event %d at revision %d after %d", i, ev.Revision, onFollower[i-1].Revision)
		}
		if !written[ev.Revision] {
			t.Fatalf("follower event at revision %d that no write returned", ev.Revision)
		}
		l := onLeader[i]
		if l.Key != ev.Key || l.Revision != ev.Revision || string(l.Value) != string(ev.Value) {
			t.Fatalf("event %d: follower %+v, leader %+v", i, ev, l)
		}
	}
}

// TestStartBeforeQuorum: a voter alone waits, says so in its log, and
// serves once a second voter arrives; start order does not matter.
func TestStartBeforeQuorum(t *testing.T) {
	c := newCluster(t, 3)
	var logs syncBuffer
	cfg := c.config(2)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	alone := c.openWith(cfg)

	done := make(chan error, 1)
	go func() {
		_, err := alone.Put(t.Context(), &sdk.PutRequest{Key: "early", Value: []byte("x"), ExpectVersion: sdk.AnyVersion})
		done <- err
	}()
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(logs.String(), "waiting for a quorum") {
		if time.Now().After(deadline) {
			t.Fatalf("no quorum warning in the log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Put returned without a quorum: %v", err)
	default:
	}
	c.open(3)
	if err := <-done; err != nil {
		t.Fatalf("Put once a quorum exists: %v", err)
	}
	c.open(1)
	if got := mustGet(t, c.leader(), "early"); string(got.Value) != "x" {
		t.Fatalf("early = %q", got.Value)
	}
}

// TestNoQuorumIsUnavailable: with two of three voters gone, requests fail
// with ErrUnavailable once LeaderWait passes, instead of hanging.
func TestNoQuorumIsUnavailable(t *testing.T) {
	c := newCluster(t, 3)
	cfg := c.config(1)
	cfg.LeaderWait = 300 * time.Millisecond
	s := c.openWith(cfg)
	_, err := s.Put(t.Context(), &sdk.PutRequest{Key: "k", Value: []byte("x"), ExpectVersion: sdk.AnyVersion})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("Put without a quorum: %v, want ErrUnavailable", err)
	}
	_, err = s.Get(t.Context(), &sdk.GetRequest{Key: "k"})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("Get without a quorum: %v, want ErrUnavailable", err)
	}
}

// TestReplaceVoter removes a dead voter and adds a fresh node in its
// place: the new node catches up and a quorum of the new membership
// serves writes.
func TestReplaceVoter(t *testing.T) {
	c := newCluster(t, 4) // node 4's port and dir are reserved, not a voter yet
	voters := map[int32]string{1: c.voters[1], 2: c.voters[2], 3: c.voters[3]}
	for id := int32(1); id <= 3; id++ {
		cfg := c.config(id)
		cfg.Voters = voters
		c.openWith(cfg)
	}
	v0 := mustPut(t, c.leader(), "before", "x", sdk.NoSession)
	dead := c.followers()[0].cfg.NodeID
	c.stop(dead)
	if err := c.leader().RemoveVoter(dead, waitLimit); err != nil {
		t.Fatal(err)
	}
	cfg := c.config(4)
	cfg.Join = true
	fresh := c.openWith(cfg)
	lead := c.leader()
	if err := lead.AddVoter(4, c.voters[4], waitLimit); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, fresh, "before"); got.Version != v0 {
		t.Fatalf("new voter reads before@%d, want %d", got.Version, v0)
	}
	// The new voter is part of the quorum: with the old leader gone too,
	// the remaining two (one old voter, the new one) elect and write.
	c.stop(lead.cfg.NodeID)
	v := putRetrying(t, fresh, "after", "y")
	if got := mustGet(t, c.leader(), "after"); got.Version != v {
		t.Fatalf("after = version %d, want %d", got.Version, v)
	}
}

// TestSessionExpiresOnTimeAcrossLeaderChange: a session whose owner
// stopped keeping alive expires one TTL after its last keep-alive even if
// the leader dies in between, because keep-alives are log entries and the
// new leader starts each deadline from the last one it applied. Before
// keep-alives were replicated, the new leader gave every session a fresh
// TTL from its takeover: a broker that died shortly before (or with) the
// raft leader kept its registration for up to an election plus a whole
// TTL more.
func TestSessionExpiresOnTimeAcrossLeaderChange(t *testing.T) {
	c := openCluster(t, 3)
	client := c.followers()[0]
	const ttl = 3 * time.Second
	g, err := client.GrantSession(ctxT(t), &sdk.GrantSessionRequest{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, client, "brokers/1", "alive", g.ID)
	var last time.Time
	for range 3 {
		last = time.Now()
		if _, err := client.KeepAlive(ctxT(t), &sdk.KeepAliveRequest{ID: g.ID}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 5)
	}
	// The owner falls silent; two thirds of a TTL later the leader dies.
	time.Sleep(2 * ttl / 3)
	c.stop(c.leader().cfg.NodeID)
	lead := c.leader()
	takeover := time.Now()
	waitGone(t, client, "brokers/1")
	gone := time.Now()
	t.Logf("last keep-alive sent %v before the key went; new leader %d took over %v after it",
		gone.Sub(last).Round(time.Millisecond), lead.cfg.NodeID, takeover.Sub(last).Round(time.Millisecond))
	// Not before the TTL: the old leader's deadline was at least that.
	if gone.Sub(last) < ttl {
		t.Errorf("session expired %v after its last keep-alive, before its TTL %v", gone.Sub(last), ttl)
	}
	// Nowhere near a fresh TTL from the takeover.
	if limit := takeover.Add(ttl / 2); gone.After(limit) {
		t.Errorf("session expired %v after the new leader took over; want about one TTL (%v) after its last keep-alive (%v after it)",
			gone.Sub(takeover), ttl, gone.Sub(last))
	}
}
