package main

import (
	"bytes"
	"net"
	"slices"
	"strings"
	"testing"
)

// TestStockKafkaProperties: a stock Kafka server.properties loads; keys
// with a meaning here are used (log.retention.hours), the others are
// listed to be warned about.
func TestStockKafkaProperties(t *testing.T) {
	f := newServeFlags(&bytes.Buffer{})
	if err := f.parse([]string{"--config", "testdata/kafka-server.properties"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.load()
	if err != nil {
		t.Fatalf("stock server.properties: %v", err)
	}
	if cfg.LogRetentionMs != 168*3600*1000 {
		t.Errorf("log.retention.hours=168 gave log.retention.ms %d", cfg.LogRetentionMs)
	}
	if cfg.LogDirs != "/tmp/kraft-combined-logs" || cfg.NodeID != 1 {
		t.Errorf("log.dirs %q node.id %d", cfg.LogDirs, cfg.NodeID)
	}
	for _, k := range []string{"num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "share.coordinator.state.topic.min.isr"} {
		if !slices.Contains(f.ignored, k) {
			t.Errorf("%s not among the ignored keys %q", k, f.ignored)
		}
	}
	if cfg.TransactionStateLogMinIsr != 1 || cfg.TransactionStateLogReplicationFactor != 1 {
		t.Errorf("transaction.state.log.min.isr %d, replication.factor %d; want the file's 1 and 1", cfg.TransactionStateLogMinIsr, cfg.TransactionStateLogReplicationFactor)
	}
	// Named listeners are ours now: the map and the inter-broker
	// listener name are used, not warned about.
	for _, k := range []string{"log.retention.hours", "listener.security.protocol.map", "inter.broker.listener.name"} {
		if slices.Contains(f.ignored, k) {
			t.Errorf("%s reported as ignored", k)
		}
	}
	if ib, err := cfg.InterBrokerListener(); err != nil || ib.Name != "PLAINTEXT" || ib.Protocol != "PLAINTEXT" {
		t.Errorf("inter-broker listener %+v, %v; want PLAINTEXT", ib, err)
	}
}

func TestKafkaAliasPrecedence(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int64
	}{
		{"log.retention.hours=2\n", 2 * 3600 * 1000},
		{"log.retention.minutes=3\nlog.retention.hours=2\n", 3 * 60 * 1000},
		{"log.retention.ms=7\nlog.retention.minutes=3\nlog.retention.hours=2\n", 7},
	} {
		cfg, err := loadArgs(t, "--config", writeFile(t, "k.properties", tc.text))
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if cfg.LogRetentionMs != tc.want {
			t.Errorf("%q: log.retention.ms %d, want %d", tc.text, cfg.LogRetentionMs, tc.want)
		}
	}
	cfg, err := loadArgs(t, "--config", writeFile(t, "k.properties", "broker.id=4\nlog.dir=/x\nlog.roll.hours=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 4 || cfg.LogDirs != "/x" || cfg.LogRollMs != 3600*1000 {
		t.Errorf("broker.id/log.dir/log.roll.hours gave node.id %d log.dirs %q log.roll.ms %d", cfg.NodeID, cfg.LogDirs, cfg.LogRollMs)
	}
}

// TestKafkaAuthorizerClass: Kafka's ACL authorizer classes turn on
// authorizer: acl; a class Vltava cannot run stops the broker rather than
// running it unprotected.
func TestKafkaAuthorizerClass(t *testing.T) {
	cfg, err := loadArgs(t, "--config", writeFile(t, "k.properties",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin;User:broker\n"+
			"allow.everyone.if.no.acl.found=true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Authorizer != "acl" || cfg.SuperUsers != "User:admin;User:broker" || !cfg.AllowEveryoneIfNoACLFound {
		t.Errorf("authorizer %q super.users %q allow.everyone %v", cfg.Authorizer, cfg.SuperUsers, cfg.AllowEveryoneIfNoACLFound)
	}
	if _, err := loadArgs(t, "--config", writeFile(t, "k.properties", "authorizer.class.name=com.example.RangerAuthorizer\n")); err == nil ||
		!strings.Contains(err.Error(), "authorizer.class.name") {
		t.Errorf("a custom authorizer class loaded: %v", err)
	}
}

// TestOverride: --override applies over the config file, flags over both.
func TestOverride(t *testing.T) {
	p := writeFile(t, "v.yaml", "num.partitions: 2\nlog.retention.ms: 100\n")
	cfg, err := loadArgs(t, "--config", p, "--override", "num.partitions=5", "--override", "log.retention.hours=1",
		"--override", "log.dirs=/o", "--data-dir", "/flag")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumPartitions != 5 || cfg.LogDirs != "/flag" {
		t.Errorf("num.partitions %d log.dirs %q", cfg.NumPartitions, cfg.LogDirs)
	}
	if cfg.LogRetentionMs != 100 { // the file's log.retention.ms beats an hours override, as in Kafka
		t.Errorf("log.retention.ms %d", cfg.LogRetentionMs)
	}
	cfg, err = loadArgs(t, "--override", "num.partitions=6") // no file
	if err != nil || cfg.NumPartitions != 6 {
		t.Errorf("--override without a file: %d, %v", cfg.NumPartitions, err)
	}
	for _, bad := range []string{"novalue", "num.partitons=3", "num.partitions=x"} {
		if _, err := loadArgs(t, "--override", bad); err == nil || !strings.Contains(err.Error(), "override") {
			t.Errorf("--override %s: %v", bad, err)
		}
	}
}

// TestAdvertisedListeners: an every-interface listener is not advertised
// as such; an explicit unroutable advertised listener is refused; the
// config subcommand prints the effective value.
func TestAdvertisedListeners(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:29092", "[::]:29092", ":29092"} {
		f := newServeFlags(&bytes.Buffer{})
		if err := f.parse([]string{"--listen", listen}); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.load()
		if err != nil {
			t.Fatalf("--listen %s: %v", listen, err)
		}
		host, port, err := net.SplitHostPort(cfg.AdvertisedListeners)
		if err != nil || port != "29092" || unspecified(host) {
			t.Errorf("--listen %s advertises %q", listen, cfg.AdvertisedListeners)
		}
		if len(f.notes) != 1 || !strings.Contains(f.notes[0], "advertising "+cfg.AdvertisedListeners) {
			t.Errorf("--listen %s: notes %q", listen, f.notes)
		}
	}
	// Named listeners: every wildcard one is advertised at the outward
	// address, a port-0 one is left to the broker, the others as bound.
	cfg, err := loadArgs(t, "--override", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,LOCAL:PLAINTEXT,EPHEMERAL:PLAINTEXT",
		"--listen", "INTERNAL://:29092,EXTERNAL://0.0.0.0:29093,LOCAL://127.0.0.1:29094,EPHEMERAL://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	advs := strings.Split(cfg.AdvertisedListeners, ",")
	if len(advs) != 3 || !strings.HasPrefix(advs[0], "INTERNAL://") || !strings.HasPrefix(advs[1], "EXTERNAL://") || advs[2] != "LOCAL://127.0.0.1:29094" {
		t.Fatalf("named listeners advertise %q", cfg.AdvertisedListeners)
	}
	for i, want := range []string{"29092", "29093"} {
		_, hp, _ := strings.Cut(advs[i], "://")
		if host, port, err := net.SplitHostPort(hp); err != nil || port != want || unspecified(host) {
			t.Errorf("listener %d advertised as %q", i, advs[i])
		}
	}
	if ls, err := cfg.ParseListeners(); err != nil || len(ls) != 4 || ls[3].AdvertisedPort != 0 {
		t.Errorf("effective listeners %+v, %v", ls, err)
	}
	for _, adv := range []string{"0.0.0.0:9092", "PLAINTEXT://:9092"} {
		if _, err := loadArgs(t, "--advertised", adv); err == nil || !strings.Contains(err.Error(), "not an address clients can connect to") {
			t.Errorf("--advertised %s: %v", adv, err)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"config", "--listen", "127.0.0.1:7777"}, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("config exited %d", code)
	}
	if !strings.Contains("\n"+out.String(), "\nadvertised.listeners=127.0.0.1:7777\n") {
		t.Errorf("config printed no effective advertised.listeners:\n%s", out.String())
	}
	// Port 0 is settled by binding: the broker advertises what it bound.
	if cfg, err := loadArgs(t, "--listen", "127.0.0.1:0"); err != nil || cfg.AdvertisedListeners != "" {
		t.Errorf("--listen 127.0.0.1:0 advertises %q (%v), want it left to the broker", cfg.AdvertisedListeners, err)
	}
	// A file whose advertised listener has a port of its own keeps it.
	p := writeFile(t, "nat.yaml", "listeners: 127.0.0.1:9092\nadvertised.listeners: proxy.test:19092\n")
	cfg, err = loadArgs(t, "--config", p, "--listen", "127.0.0.1:8000")
	if err != nil || cfg.AdvertisedListeners != "proxy.test:19092" {
		t.Errorf("NAT advertised listener: %q, %v", cfg.AdvertisedListeners, err)
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--version"}, &out, &bytes.Buffer{}); code != 0 || !strings.HasPrefix(out.String(), "vltavad github.com/vltava/vltava ") {
		t.Errorf("--version exited %d, printed %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"config", "-h"}, &out, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "--data-dir DIR") {
		t.Errorf("config -h exited %d, printed %q", code, out.String())
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{
		"log.retension.ms":   "log.retention.ms",
		"num.partiton":       "num.partitions",
		"log.retention.hour": "log.retention.hours",
		"frobnicate":         "",
	} {
		if got := suggest(in); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStockPropertiesFollowListen: --listen over a stock server.properties
// moves its PLAINTEXT advertised listener and drops the CONTROLLER one,
// whose listener --listen replaced.
func TestStockPropertiesFollowListen(t *testing.T) {
	cfg, err := loadArgs(t, "--config", "testdata/kafka-server.properties", "--listen", "127.0.0.1:8000")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AdvertisedListeners != "PLAINTEXT://localhost:8000" {
		t.Errorf("advertised.listeners %q, want PLAINTEXT://localhost:8000", cfg.AdvertisedListeners)
	}
}
