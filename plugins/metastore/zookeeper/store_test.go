package zookeeper

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
	"github.com/vltava/vltava/plugins/sdk"
)

// TestDigestACL: with auth.digest, the store's znodes are not readable or
// writable by a client without the credentials.
func TestDigestACL(t *testing.T) {
	e := zktest.Start(t, 1)
	connect := e.Connect() + "/secured"
	s := openStore(t, e, Config{Connect: connect, Digest: "vltava:s3cret"})
	ctx := t.Context()
	if _, err := s.Put(ctx, &sdk.PutRequest{Key: "topics/a", Value: []byte("x"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatal(err)
	}
	anon, _, err := zk.Connect([]string{e.Servers[0].ClientAddr}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	node := "/secured/kv/" + encodeName("topics/a")
	if _, err := anon.Set(node, []byte("evil"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous Set of %s: err = %v, want ErrNoAuth", node, err)
	}
	if _, _, err := anon.Get(node); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous Get of %s: err = %v, want ErrNoAuth", node, err)
	}
	if _, err := anon.Create("/secured/kv/evil", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous Create under the store: err = %v, want ErrNoAuth", err)
	}
	// A store with the wrong password cannot use the store either.
	wrong, err := Open(ctx, Config{Connect: connect, Digest: "vltava:wrong", SessionTimeout: testSessionTimeout, RequestTimeout: 5 * time.Second}, nil)
	if err == nil {
		defer wrong.Close()
		_, err = wrong.Get(ctx, &sdk.GetRequest{Key: "topics/a"})
	}
	if err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("store with a wrong password: err = %v, want not authorized", err)
	}
}

// TestSessionEndsWithZooKeeperSession: when the store instance that
// granted a session loses its ZooKeeper session (here: it closes, which
// ends its ZooKeeper session as a crash would after the timeout), another
// instance ends the store session: its keys are deleted in one revision
// and watchers see it.
func TestSessionEndsWithZooKeeperSession(t *testing.T) {
	e := zktest.Start(t, 1)
	connect := fmt.Sprintf("%s/orphans", e.Connect())
	a := openStore(t, e, Config{Connect: connect})
	b := openStore(t, e, Config{Connect: connect})
	ctx := t.Context()
	g, err := a.GrantSession(ctx, &sdk.GrantSessionRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"brokers/1", "brokers/1/endpoint"} {
		if _, err := a.Put(ctx, &sdk.PutRequest{Key: k, Value: []byte("x"), ExpectVersion: sdk.AnyVersion, Session: g.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.KeepAlive(ctx, &sdk.KeepAliveRequest{ID: g.ID}); !errors.Is(err, sdk.ErrSessionExpired) {
		t.Fatalf("KeepAlive through an instance that did not grant the session: %v, want ErrSessionExpired", err)
	}
	if _, err := a.KeepAlive(ctx, &sdk.KeepAliveRequest{ID: g.ID}); err != nil {
		t.Fatalf("KeepAlive through the granting instance: %v", err)
	}
	w, err := b.Watch(ctx, &sdk.WatchRequest{Prefix: "brokers/"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a.Close()
	var revs []int64
	for range 2 {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != sdk.EventDelete {
			t.Fatalf("event %+v, want a delete", ev)
		}
		revs = append(revs, ev.Revision)
	}
	if revs[0] != revs[1] {
		t.Fatalf("session end deleted its keys at revisions %v, want one", revs)
	}
	if _, err := b.Get(ctx, &sdk.GetRequest{Key: "brokers/1"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Get after the session ended: %v, want ErrNotFound", err)
	}
	if _, err := b.KeepAlive(ctx, &sdk.KeepAliveRequest{ID: g.ID}); !errors.Is(err, sdk.ErrSessionExpired) {
		t.Fatalf("KeepAlive of the ended session: %v, want ErrSessionExpired", err)
	}
}

// TestLogRetention: the change log is pruned to log.retention revisions
// and a watch from before that fails with ErrCompacted.
func TestLogRetention(t *testing.T) {
	e := zktest.Start(t, 1)
	s := openStore(t, e, Config{LogRetention: 10})
	ctx := t.Context()
	var first int64
	for i := range 2 * pruneEvery {
		r, err := s.Put(ctx, &sdk.PutRequest{Key: "k", Value: []byte{byte(i)}, ExpectVersion: sdk.AnyVersion})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.Version
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		w, err := s.Watch(ctx, &sdk.WatchRequest{FromRevision: first})
		if err == nil {
			w.Close()
		}
		if errors.Is(err, sdk.ErrCompacted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch from revision %d after %d writes with retention 10: err = %v, want ErrCompacted", first, 2*pruneEvery, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n, _, err := s.conn.Children(s.p.log)
	if err != nil {
		t.Fatal(err)
	}
	if len(n) > 10+pruneEvery {
		t.Fatalf("%d log entries kept, want at most %d", len(n), 10+pruneEvery)
	}
}
