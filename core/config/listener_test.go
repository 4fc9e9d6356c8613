package config

import (
	"slices"
	"testing"
)

func TestListenerProtocol(t *testing.T) {
	for _, tc := range []struct {
		listeners, proto, addr string
		bad                    bool
	}{
		{listeners: "127.0.0.1:9092", proto: ProtocolPlaintext, addr: "127.0.0.1:9092"},
		{listeners: "PLAINTEXT://:9092", proto: ProtocolPlaintext, addr: ":9092"},
		{listeners: "SASL_PLAINTEXT://127.0.0.1:0", proto: ProtocolSASLPlaintext, addr: "127.0.0.1:0"},
		{listeners: "sasl_plaintext://h:1, PLAINTEXT://h:2", proto: ProtocolSASLPlaintext, addr: "h:1"},
		{listeners: "SSL://h:9093", bad: true},
		{listeners: "SASL_SSL://h:9093", bad: true},
	} {
		b := DefaultBroker()
		b.Listeners = tc.listeners
		proto, perr := b.ListenerProtocol()
		addr, aerr := b.ListenAddr()
		verr := b.Validate()
		if tc.bad {
			if perr == nil || aerr == nil || verr == nil {
				t.Errorf("%q: want errors, got protocol %v, addr %v, validate %v", tc.listeners, perr, aerr, verr)
			}
			continue
		}
		if perr != nil || aerr != nil || verr != nil {
			t.Errorf("%q: protocol %v, addr %v, validate %v", tc.listeners, perr, aerr, verr)
			continue
		}
		if proto != tc.proto || addr != tc.addr {
			t.Errorf("%q: got %s %s, want %s %s", tc.listeners, proto, addr, tc.proto, tc.addr)
		}
	}
}

func TestSASLMechanisms(t *testing.T) {
	b := DefaultBroker()
	if m := b.SASLMechanisms(); m != nil {
		t.Errorf("default sasl.enabled.mechanisms = %q, want none (every mechanism offered)", m)
	}
	b.SaslEnabledMechanisms = " PLAIN, SCRAM-SHA-256,,"
	if m := b.SASLMechanisms(); !slices.Equal(m, []string{"PLAIN", "SCRAM-SHA-256"}) {
		t.Errorf("SASLMechanisms() = %q", m)
	}
}
