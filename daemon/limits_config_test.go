package main

import (
	"strings"
	"testing"
)

// The request memory and connection limit keys load from a Kafka
// .properties file, and a bad value names its key.
func TestConnectionLimitKeys(t *testing.T) {
	p := writeFile(t, "server.properties", `queued.max.request.bytes=209715200
max.connections=5000
max.connections.per.ip=100
max.connections.per.ip.overrides=127.0.0.1:1000, 10.0.0.7:0
`)
	got, err := loadArgs(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if got.QueuedMaxRequestBytes != 200<<20 || got.MaxConnections != 5000 || got.MaxConnectionsPerIP != 100 ||
		got.MaxConnectionsPerIPOverrides != "127.0.0.1:1000, 10.0.0.7:0" {
		t.Fatalf("loaded %d, %d, %d, %q", got.QueuedMaxRequestBytes, got.MaxConnections, got.MaxConnectionsPerIP, got.MaxConnectionsPerIPOverrides)
	}
	for _, tc := range []struct{ text, want string }{
		{"max.connections.per.ip.overrides=broker-1:5\n", "max.connections.per.ip.overrides"},
		{"queued.max.request.bytes=1048576\n", "queued.max.request.bytes"},
		{"max.connections=-5\n", "max.connections"},
	} {
		_, err := loadArgs(t, "--config", writeFile(t, "bad.properties", tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %s", tc.text, err, tc.want)
		}
	}
}
