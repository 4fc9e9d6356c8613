package raft

import (
	"errors"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/vltava/vltava/plugins/sdk"
)

// TestNonVoter: a node outside the voter set joins as a non-voter, writes
// and reads through the leader, watches from its own log, is no part of
// the quorum (the single voter keeps writing while it is down) and
// catches up after a restart.
func TestNonVoter(t *testing.T) {
	c := newCluster(t, 2)
	voters := map[int32]string{1: c.voters[1]}
	cfg := c.config(1)
	cfg.Voters = voters
	c.openWith(cfg)
	lead := c.leader()

	nvCfg := c.config(2)
	nvCfg.Voters = voters
	nvCfg.NonVoter = true
	nv := c.openWith(nvCfg)
	watch, err := nv.Watch(ctxT(t), &sdk.WatchRequest{Prefix: "/k"})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	v := putRetrying(t, nv, "/k", "from-non-voter")
	if got := mustGet(t, lead, "/k"); got.Version != v || string(got.Value) != "from-non-voter" {
		t.Fatalf("leader reads /k = %q@%d, want from-non-voter@%d", got.Value, got.Version, v)
	}
	ev, err := watch.Recv()
	if err != nil || ev.Key != "/k" || ev.Version != v {
		t.Fatalf("non-voter watch: %+v, %v; want /k@%d", ev, err, v)
	}

	f := lead.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	suffrage := map[hraft.ServerID]hraft.ServerSuffrage{}
	for _, s := range f.Configuration().Servers {
		suffrage[s.ID] = s.Suffrage
	}
	if len(suffrage) != 2 || suffrage["1"] != hraft.Voter || suffrage["2"] != hraft.Nonvoter {
		t.Fatalf("configuration %v, want 1 voter and 2 non-voter", f.Configuration().Servers)
	}

	c.stop(2)
	v2 := mustPut(t, lead, "/k", "while-down", sdk.NoSession) // one voter is the whole quorum
	nv = c.openWith(nvCfg)
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := nv.Get(ctxT(t), &sdk.GetRequest{Key: "/k"})
		if err == nil && resp.Version == v2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted non-voter reads /k: %+v, %v; want version %d", resp, err, v2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNonVoterRefused: a non-voter may not take a voter's node ID, on
// either side of the join.
func TestNonVoterRefused(t *testing.T) {
	c := openCluster(t, 1)
	cfg := c.config(1)
	cfg.NonVoter = true
	cfg.QuorumAddr = "127.0.0.1:0"
	if _, err := Open(cfg); err == nil {
		t.Fatal("Open accepted a non-voter whose node ID is a voter's")
	}
	err := c.leader().addNonvoter(ctxT(t), 1, "127.0.0.1:1")
	if !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("join as voter 1: %v, want ErrInvalidArgument", err)
	}
	cfg = c.config(2)
	cfg.DataDir = t.TempDir()
	cfg.NonVoter = true
	cfg.QuorumAddr = "0.0.0.0:0"
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "wildcard") {
		t.Fatalf("Open with a wildcard non-voter address: %v, want a wildcard error", err)
	}
}
