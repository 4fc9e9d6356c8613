package main

import (
	"strings"
	"testing"
)

// TestProcessRoles: --process-roles reaches process.roles, and the raft
// store config follows it (a broker-only node is a non-voter and needs a
// quorum address of its own).
func TestProcessRoles(t *testing.T) {
	cfg, err := loadArgs(t, "--process-roles", "broker", "--quorum-voters", "3@127.0.0.1:1", "--quorum-listen", "127.0.0.1:2", "--node-id", "1")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := cfg.Roles(); !r.Broker || r.Controller {
		t.Fatalf("roles %+v, want broker only", r)
	}
	conf, err := raftStoreConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if conf["non.voter"] != true || conf["quorum.listen"] != "127.0.0.1:2" {
		t.Errorf("raft config %v, want non.voter and quorum.listen", conf)
	}

	cfg.ControllerQuorumListen = ""
	if _, err := raftStoreConfig(cfg, nil); err == nil || !strings.Contains(err.Error(), "quorum.listen") {
		t.Errorf("broker without a quorum address: %v", err)
	}
	cfg.ControllerQuorumVoters = ""
	if _, err := pluginSpecs(cfg); err == nil || !strings.Contains(err.Error(), "voters") {
		t.Errorf("broker without voters: %v", err)
	}

	def, err := loadArgs(t, "--quorum-voters", "1@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if conf, err := raftStoreConfig(def, nil); err != nil || conf["non.voter"] != nil {
		t.Errorf("default roles: raft config %v, %v; want a voter", conf, err)
	}
	if _, err := loadArgs(t, "--process-roles", "broker,observer"); err == nil || !strings.Contains(err.Error(), "process.roles") {
		t.Errorf("bad --process-roles: %v", err)
	}
}
