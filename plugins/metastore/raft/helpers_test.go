package raft

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// waitLimit bounds every poll in these tests; reaching it is a failure.
const waitLimit = 20 * time.Second

// testLogger discards logs unless VLTAVA_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("VLTAVA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// syncBuffer collects log output for assertions.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cluster is n in-process voters on loopback ports chosen at run time.
type cluster struct {
	t      *testing.T
	dirs   map[int32]string
	voters map[int32]string
	stores map[int32]*Store // open stores; closed ones are removed
	tune   func(*Config)
	mu     sync.Mutex
}

// newCluster reserves ports and data dirs; start opens the voters.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, dirs: map[int32]string{}, voters: map[int32]string{}, stores: map[int32]*Store{}}
	base := t.TempDir()
	for i := 1; i <= n; i++ {
		id := int32(i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.voters[id] = ln.Addr().String()
		ln.Close() // reopened on the same port by open
		c.dirs[id] = filepath.Join(base, "node"+strconv.Itoa(i))
	}
	t.Cleanup(c.closeAll)
	return c
}

// openCluster starts n voters and waits for a leader.
func openCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := newCluster(t, n)
	for id := range c.voters {
		c.open(id)
	}
	c.leader()
	return c
}

func (c *cluster) config(id int32) Config {
	cfg := Config{
		NodeID:  id,
		DataDir: c.dirs[id],
		Voters:  c.voters,
		Logger:  testLogger(),
		// Small enough for fast elections, large enough that a loaded
		// 2-core CI machine under -race does not drop leaders.
		HeartbeatTimeout: 400 * time.Millisecond,
		ElectionTimeout:  400 * time.Millisecond,
		CommitTimeout:    10 * time.Millisecond,
		ReapInterval:     20 * time.Millisecond,
		LeaderWait:       waitLimit,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	return cfg
}

// open starts voter id (again, after stop) on its port.
func (c *cluster) open(id int32) *Store {
	c.t.Helper()
	return c.openWith(c.config(id))
}

func (c *cluster) openWith(cfg Config) *Store {
	c.t.Helper()
	var ln net.Listener
	deadline := time.Now().Add(waitLimit)
	for {
		var err error
		if ln, err = net.Listen("tcp", c.voters[cfg.NodeID]); err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("listen %s: %v", c.voters[cfg.NodeID], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg.Listener = ln
	s, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("Open node %d: %v", cfg.NodeID, err)
	}
	c.mu.Lock()
	c.stores[cfg.NodeID] = s
	c.mu.Unlock()
	return s
}

// stop closes voter id.
func (c *cluster) stop(id int32) {
	c.t.Helper()
	c.mu.Lock()
	s := c.stores[id]
	delete(c.stores, id)
	c.mu.Unlock()
	if err := s.Close(); err != nil {
		c.t.Errorf("Close node %d: %v", id, err)
	}
}

func (c *cluster) closeAll() {
	c.mu.Lock()
	ids := make([]int32, 0, len(c.stores))
	for id := range c.stores {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.stop(id)
	}
}

// leader polls until one open voter leads and all open voters agree.
func (c *cluster) leader() *Store {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		c.mu.Lock()
		var lead *Store
		agree := true
		for _, s := range c.stores {
			if s.IsLeader() {
				lead = s
			}
		}
		if lead != nil {
			for _, s := range c.stores {
				if s.cfg.Join && s.raft.LastIndex() == 0 {
					continue // not added yet: knows no leader
				}
				if id, _, ok := s.Leader(); !ok || id != lead.cfg.NodeID {
					agree = false
				}
			}
		}
		c.mu.Unlock()
		if lead != nil && agree {
			return lead
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no agreed leader among %d voters after %v", len(c.stores), waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// followers returns the open voters that do not lead.
func (c *cluster) followers() []*Store {
	lead := c.leader()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Store
	for _, s := range c.stores {
		if s != lead {
			out = append(out, s)
		}
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s sdk.MetadataStore, key, value string, session sdk.SessionID) int64 {
	t.Helper()
	resp, err := s.Put(ctxT(t), &sdk.PutRequest{Key: key, Value: []byte(value), ExpectVersion: sdk.AnyVersion, Session: session})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return resp.Version
}

func mustGet(t *testing.T, s sdk.MetadataStore, key string) *sdk.GetResponse {
	t.Helper()
	resp, err := s.Get(ctxT(t), &sdk.GetRequest{Key: key})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return resp
}

// waitGone polls until key no longer exists.
func waitGone(t *testing.T, s sdk.MetadataStore, key string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		_, err := s.Get(ctxT(t), &sdk.GetRequest{Key: key})
		if errors.Is(err, sdk.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q still exists after %v", key, waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
