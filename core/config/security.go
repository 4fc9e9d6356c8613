package config

import (
	"fmt"
	"strings"
)

// Client-certificate policies of ssl.client.auth (Kafka's values).
const (
	ClientAuthNone      = "none"      // no certificate asked for
	ClientAuthRequested = "requested" // asked for; a client without one is still served
	ClientAuthRequired  = "required"  // a client without a trusted certificate is refused
)

// InterBrokerMechanisms are the SASL mechanisms a broker can use towards
// another broker (sasl.mechanism.inter.broker.protocol).
var InterBrokerMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// HasKeystore reports whether the broker has a certificate and key, in a
// file or inline.
func (b Broker) HasKeystore() bool {
	return b.SslKeystoreLocation != "" || b.SslKeystoreCertificateChain != ""
}

// HasTruststore reports whether CA certificates are configured.
func (b Broker) HasTruststore() bool {
	return b.SslTruststoreLocation != "" || b.SslTruststoreCertificates != ""
}

// QuorumTLS reports whether the raft quorum port uses mutual TLS.
func (b Broker) QuorumTLS() bool {
	return strings.EqualFold(strings.TrimSpace(b.ControllerQuorumSecurityProtocol), ProtocolSSL)
}

// ClientAuth is ssl.client.auth, lower case.
func (b Broker) ClientAuth() string { return strings.ToLower(strings.TrimSpace(b.SslClientAuth)) }

// validateSecurity checks the listener, TLS and SASL keys.
func (b Broker) validateSecurity() error {
	ls, err := b.ParseListeners()
	if err != nil {
		return err
	}
	ib, err := b.InterBrokerListener()
	if err != nil {
		return err
	}
	for key, v := range map[string]string{"ssl.keystore.type": b.SslKeystoreType, "ssl.truststore.type": b.SslTruststoreType} {
		if v != "" && !strings.EqualFold(v, "PEM") {
			return fmt.Errorf("config: %s %q: only PEM is supported (convert a JKS or PKCS12 store with keytool or openssl)", key, v)
		}
	}
	switch b.ClientAuth() {
	case ClientAuthNone, ClientAuthRequested, ClientAuthRequired:
	default:
		return fmt.Errorf("config: ssl.client.auth %q: want none, requested or required", b.SslClientAuth)
	}
	if b.SslKeystoreLocation != "" && (b.SslKeystoreCertificateChain != "" || b.SslKeystoreKey != "") {
		return fmt.Errorf("config: give ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
	}
	if (b.SslKeystoreCertificateChain == "") != (b.SslKeystoreKey == "") {
		return fmt.Errorf("config: ssl.keystore.certificate.chain and ssl.keystore.key go together")
	}
	if b.SslTruststoreLocation != "" && b.SslTruststoreCertificates != "" {
		return fmt.Errorf("config: give ssl.truststore.location or ssl.truststore.certificates, not both")
	}
	for _, l := range ls {
		if l.TLS() && !b.HasKeystore() {
			return fmt.Errorf("config: listener %s (%s) needs ssl.keystore.location (a PEM file with the certificate chain and the private key)", l.Name, l.Protocol)
		}
	}
	if b.ClientAuth() == ClientAuthRequired && !b.HasTruststore() {
		for _, l := range ls {
			if l.Protocol == ProtocolSSL {
				return fmt.Errorf("config: ssl.client.auth=required needs ssl.truststore.location (the CA certificates client certificates are checked against)")
			}
		}
	}
	switch p := strings.ToUpper(strings.TrimSpace(b.ControllerQuorumSecurityProtocol)); p {
	case "", ProtocolPlaintext:
	case ProtocolSSL:
		if !b.HasKeystore() || !b.HasTruststore() {
			return fmt.Errorf("config: controller.quorum.security.protocol=SSL needs ssl.keystore.location and ssl.truststore.location")
		}
	default:
		return fmt.Errorf("config: controller.quorum.security.protocol %q: want PLAINTEXT or SSL", b.ControllerQuorumSecurityProtocol)
	}
	if b.SaslServerMaxReceiveSize < 1 {
		return fmt.Errorf("config: sasl.server.max.receive.size: value out of range")
	}
	if b.ConnectionsMaxReauthMs < 0 {
		return fmt.Errorf("config: connections.max.reauth.ms: value out of range")
	}
	// A single broker never dials another, so inter-broker credentials
	// are checked here only once given; a cluster member without them
	// is refused when it joins (broker.interBrokerOpts).
	if ib.SASL() && (b.SaslMechanismInterBrokerProtocol != "" || b.InterBrokerSaslUsername != "") {
		m := strings.ToUpper(strings.TrimSpace(b.SaslMechanismInterBrokerProtocol))
		ok := false
		for _, x := range InterBrokerMechanisms {
			ok = ok || x == m
		}
		if !ok {
			return fmt.Errorf("config: sasl.mechanism.inter.broker.protocol %q: the inter-broker listener %s uses SASL; want one of %s",
				b.SaslMechanismInterBrokerProtocol, ib.Name, strings.Join(InterBrokerMechanisms, ", "))
		}
		if b.InterBrokerSaslUsername == "" {
			return fmt.Errorf("config: inter.broker.sasl.username: the inter-broker listener %s uses SASL and needs credentials", ib.Name)
		}
	}
	return nil
}
