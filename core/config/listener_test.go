package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseListeners(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		listeners, adv, pm, ib string
		want                   []Listener
		wantIB                 string
		bad                    string // substring of the error
	}{
		{name: "bare", listeners: "127.0.0.1:9092",
			want: []Listener{{Name: "PLAINTEXT", Protocol: ProtocolPlaintext, Addr: "127.0.0.1:9092"}}, wantIB: "PLAINTEXT"},
		{name: "named", listeners: "PLAINTEXT://:9092", adv: "PLAINTEXT://h:9092",
			want: []Listener{{Name: "PLAINTEXT", Protocol: ProtocolPlaintext, Addr: ":9092", AdvertisedHost: "h", AdvertisedPort: 9092}}, wantIB: "PLAINTEXT"},
		{name: "bare advertised", listeners: "0.0.0.0:9092", adv: "h:1",
			want: []Listener{{Name: "PLAINTEXT", Protocol: ProtocolPlaintext, Addr: "0.0.0.0:9092", AdvertisedHost: "h", AdvertisedPort: 1}}, wantIB: "PLAINTEXT"},
		{name: "several", listeners: "sasl_plaintext://h:1, PLAINTEXT://h:2,SSL://h:3,SASL_SSL://h:4", adv: "SSL://x:3", ib: "ssl",
			want: []Listener{
				{Name: "SASL_PLAINTEXT", Protocol: ProtocolSASLPlaintext, Addr: "h:1"},
				{Name: "PLAINTEXT", Protocol: ProtocolPlaintext, Addr: "h:2"},
				{Name: "SSL", Protocol: ProtocolSSL, Addr: "h:3", AdvertisedHost: "x", AdvertisedPort: 3},
				{Name: "SASL_SSL", Protocol: ProtocolSASLSSL, Addr: "h:4"},
			}, wantIB: "SSL"},
		{name: "mapped", listeners: "INTERNAL://:9094,EXTERNAL://:9093", pm: "INTERNAL:SSL, external:sasl_ssl", ib: "INTERNAL",
			want: []Listener{
				{Name: "INTERNAL", Protocol: ProtocolSSL, Addr: ":9094"},
				{Name: "EXTERNAL", Protocol: ProtocolSASLSSL, Addr: ":9093"},
			}, wantIB: "INTERNAL"},
		{name: "remapped default name", listeners: "PLAINTEXT://:1", pm: "PLAINTEXT:SSL",
			want: []Listener{{Name: "PLAINTEXT", Protocol: ProtocolSSL, Addr: ":1"}}, wantIB: "PLAINTEXT"},
		{name: "unmapped", listeners: "INTERNAL://:9094", bad: "no security protocol"},
		{name: "bad map", listeners: "A://:1", pm: "A:TLS", bad: "listener.security.protocol.map"},
		{name: "dup", listeners: "SSL://:1,ssl://:2", bad: "used twice"},
		{name: "no port", listeners: "SSL://h", bad: "missing port"},
		{name: "advertised unknown", listeners: "SSL://:1", adv: "PLAINTEXT://h:1", bad: "not among"},
		{name: "advertised wildcard", listeners: "SSL://:1", adv: "SSL://0.0.0.0:1", bad: "wildcard"},
		{name: "ib unknown", listeners: "SSL://:1", ib: "INTERNAL", bad: "inter.broker.listener.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := DefaultBroker()
			b.Listeners, b.AdvertisedListeners, b.ListenerSecurityProtocolMap, b.InterBrokerListenerName = tc.listeners, tc.adv, tc.pm, tc.ib
			ls, err := b.ParseListeners()
			var ib Listener
			if err == nil {
				ib, err = b.InterBrokerListener()
			}
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err = %v, want one containing %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, ls); d != "" {
				t.Errorf("listeners (-want +got):\n%s", d)
			}
			if ib.Name != tc.wantIB {
				t.Errorf("inter-broker listener %s, want %s", ib.Name, tc.wantIB)
			}
		})
	}
}

func TestValidateSecurity(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Broker)
		bad  string
	}{
		{name: "ssl without keystore", set: func(b *Broker) { b.Listeners = "SSL://:0" }, bad: "needs ssl.keystore.location"},
		{name: "ssl with keystore", set: func(b *Broker) { b.Listeners = "SSL://:0"; b.SslKeystoreLocation = "k.pem" }},
		{name: "jks", set: func(b *Broker) { b.SslKeystoreType = "JKS" }, bad: "only PEM"},
		{name: "client auth", set: func(b *Broker) { b.SslClientAuth = "maybe" }, bad: "ssl.client.auth"},
		{name: "required without truststore", set: func(b *Broker) {
			b.Listeners = "SSL://:0"
			b.SslKeystoreLocation = "k.pem"
			b.SslClientAuth = "REQUIRED"
		}, bad: "needs ssl.truststore.location"},
		{name: "inline half", set: func(b *Broker) { b.SslKeystoreCertificateChain = "x" }, bad: "go together"},
		{name: "both keystores", set: func(b *Broker) {
			b.SslKeystoreLocation = "k"
			b.SslKeystoreCertificateChain = "x"
			b.SslKeystoreKey = "y"
		}, bad: "not both"},
		{name: "quorum ssl", set: func(b *Broker) { b.ControllerQuorumSecurityProtocol = "SSL" }, bad: "controller.quorum.security.protocol=SSL"},
		{name: "quorum tls", set: func(b *Broker) { b.ControllerQuorumSecurityProtocol = "TLS" }, bad: "want PLAINTEXT or SSL"},
		{name: "sasl single broker", set: func(b *Broker) { b.Listeners = "SASL_PLAINTEXT://:0" }},
		{name: "sasl ib no mechanism", set: func(b *Broker) { b.Listeners = "SASL_PLAINTEXT://:0"; b.InterBrokerSaslUsername = "u" }, bad: "sasl.mechanism.inter.broker.protocol"},
		{name: "sasl ib no user", set: func(b *Broker) {
			b.Listeners = "SASL_PLAINTEXT://:0"
			b.SaslMechanismInterBrokerProtocol = "SCRAM-SHA-512"
		}, bad: "inter.broker.sasl.username"},
		{name: "sasl ib", set: func(b *Broker) {
			b.Listeners = "SASL_PLAINTEXT://:0,PLAINTEXT://:0"
			b.InterBrokerListenerName = "PLAINTEXT"
		}},
		{name: "max receive", set: func(b *Broker) { b.SaslServerMaxReceiveSize = 0 }, bad: "sasl.server.max.receive.size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := DefaultBroker()
			tc.set(&b)
			err := b.Validate()
			if tc.bad == "" && err != nil {
				t.Fatal(err)
			}
			if tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("err = %v, want one containing %q", err, tc.bad)
			}
		})
	}
}

func TestSensitiveValuesHidden(t *testing.T) {
	b := DefaultBroker()
	b.SslKeyPassword, b.InterBrokerSaslPassword, b.SslKeystoreKey = "secret1", "secret2", "secret3"
	for _, v := range BrokerValues(b) {
		if strings.Contains(v.Value, "secret") {
			t.Errorf("%s shows its value %q", v.Name, v.Value)
		}
		if (v.Name == "ssl.key.password" || v.Name == "inter.broker.sasl.password") != (v.Sensitive && v.Name != "ssl.keystore.key") {
			t.Errorf("%s: sensitive = %v", v.Name, v.Sensitive)
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
