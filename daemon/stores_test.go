package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExternalStoreSelection: zookeeper.connect selects the zookeeper
// store (with its connect string and a session timeout that defaults to
// broker.session.timeout.ms) and makes the broker a cluster member;
// metadata.store etcd needs endpoints.
func TestExternalStoreSelection(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := loadArgs(t, "--config", write("zk.yaml", "zookeeper.connect: a:2181,b:2181/chroot\nbroker.session.timeout.ms: 4000\n"))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := pluginSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := specs[0]
	if s.Name != "zookeeper" || s.Config["connect"] != "a:2181,b:2181/chroot" || s.Config["session.timeout"] != "4s" {
		t.Errorf("store spec %s %v, want zookeeper with connect and session.timeout 4s", s.Name, s.Config)
	}
	if !sharedStore(cfg) {
		t.Error("zookeeper.connect: not a shared (cluster) store")
	}
	cfg, err = loadArgs(t, "--config", write("zk2.yaml", "metadata.store: zookeeper\nzookeeper.connect: a:2181\nzookeeper.session.timeout.ms: 7000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if specs, err = pluginSpecs(cfg); err != nil || specs[0].Config["session.timeout"] != "7s" {
		t.Errorf("zookeeper.session.timeout.ms 7000: %v %v", err, specs)
	}

	cfg, err = loadArgs(t, "--config", write("etcd.yaml", "metadata.store: etcd\nmetadata.store.config: {endpoints: \"e1:2379,e2:2379\", prefix: /v}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if specs, err = pluginSpecs(cfg); err != nil || specs[0].Name != "etcd" || specs[0].Config["endpoints"] != "e1:2379,e2:2379" {
		t.Errorf("etcd store spec: %v %v", err, specs)
	}
	if !sharedStore(cfg) {
		t.Error("etcd: not a shared (cluster) store")
	}
	cfg, err = loadArgs(t, "--config", write("etcd2.yaml", "metadata.store: etcd\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pluginSpecs(cfg); err == nil || !strings.Contains(err.Error(), "endpoints") {
		t.Errorf("etcd without endpoints: %v", err)
	}
}
