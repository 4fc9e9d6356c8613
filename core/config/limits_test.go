package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConnectionOverrides(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[netip.Addr]int
		err  string
	}{
		{"", map[netip.Addr]int{}, ""},
		{"127.0.0.1:200, 10.0.0.7:0", map[netip.Addr]int{
			netip.MustParseAddr("127.0.0.1"): 200, netip.MustParseAddr("10.0.0.7"): 0}, ""},
		{"::1:5,[fe80::2]:6", map[netip.Addr]int{
			netip.MustParseAddr("::1"): 5, netip.MustParseAddr("fe80::2"): 6}, ""},
		{"::ffff:10.1.1.1:3", map[netip.Addr]int{netip.MustParseAddr("10.1.1.1"): 3}, ""},
		{"broker-1:100", nil, "not an IP address"},
		{"127.0.0.1", nil, "want IP:count"},
		{"127.0.0.1:-1", nil, "count must be"},
		{"127.0.0.1:x", nil, "count must be"},
	} {
		b := DefaultBroker()
		b.MaxConnectionsPerIPOverrides = tc.in
		got, err := b.ConnectionOverrides()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "max.connections.per.ip.overrides") {
				t.Errorf("%q: error %v, want one naming the key and %q", tc.in, err, tc.err)
			}
			if b.Validate() == nil {
				t.Errorf("%q: Validate accepted it", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
			t.Errorf("%q: (-want +got)\n%s", tc.in, d)
		}
	}
}

func TestRequestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Broker)
		key  string // "" when valid
	}{
		{"defaults", func(*Broker) {}, ""},
		{"pool off", func(b *Broker) { b.QueuedMaxRequestBytes = -1 }, ""},
		{"pool smaller than a frame", func(b *Broker) { b.QueuedMaxRequestBytes = 50 << 20 }, "queued.max.request.bytes"},
		{"pool equal to a frame", func(b *Broker) { b.QueuedMaxRequestBytes = 100 << 20 }, ""},
		{"negative max.connections", func(b *Broker) { b.MaxConnections = -1 }, "max.connections"},
		{"zero per ip", func(b *Broker) { b.MaxConnectionsPerIP = 0 }, "max.connections.per.ip"},
	} {
		b := DefaultBroker()
		tc.set(&b)
		err := b.Validate()
		if tc.key == "" && err != nil || tc.key != "" && (err == nil || !strings.Contains(err.Error(), tc.key+":")) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", tc.name, err, tc.key)
		}
	}
	if b := DefaultBroker(); b.QueuedMaxRequestBytes != 256<<20 || b.MaxConnections != 0 || b.MaxConnectionsPerIP != 1<<31-1 {
		t.Errorf("defaults: queued.max.request.bytes %d, max.connections %d, max.connections.per.ip %d",
			b.QueuedMaxRequestBytes, b.MaxConnections, b.MaxConnectionsPerIP)
	}
}
