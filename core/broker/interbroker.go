package broker

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/vltava/vltava/core/tlsconf"
)

// interBrokerOpts are the kgo options of every client this broker opens
// to another broker (replica fetchers): the inter-broker listener's
// security. On a TLS listener the broker presents its own keystore as the
// client certificate and checks the peer against its truststore; on a
// SASL listener it authenticates with sasl.mechanism.inter.broker.protocol
// and inter.broker.sasl.username/password. A broker the others do not
// accept cannot fetch: its fetchers log the refusal and retry.
func (b *Broker) interBrokerOpts() ([]kgo.Opt, error) {
	tc, m, err := b.interBrokerSecurity()
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// interBrokerSecurity is the TLS client configuration and SASL mechanism
// (each nil when the inter-broker listener does not use it) of this
// broker's connections to the others, as interBrokerOpts describes.
func (b *Broker) interBrokerSecurity() (*tls.Config, sasl.Mechanism, error) {
	ib, err := b.cfg.InterBrokerListener() // validated in New
	if err != nil {
		return nil, nil, err
	}
	var (
		tc *tls.Config
		m  sasl.Mechanism
	)
	if ib.TLS() {
		if tc, err = tlsconf.FilesOf(b.cfg).Client(); err != nil {
			return nil, nil, fmt.Errorf("broker: inter-broker listener %s: %w", ib.Name, err)
		}
	}
	if ib.SASL() {
		if b.cfg.InterBrokerSaslUsername == "" {
			return nil, nil, fmt.Errorf("broker: the inter-broker listener %s uses SASL: set sasl.mechanism.inter.broker.protocol, inter.broker.sasl.username and inter.broker.sasl.password", ib.Name)
		}
		if m, err = interBrokerMechanism(b.cfg.SaslMechanismInterBrokerProtocol, b.cfg.InterBrokerSaslUsername, b.cfg.InterBrokerSaslPassword); err != nil {
			return nil, nil, err
		}
	}
	return tc, m, nil
}

func interBrokerMechanism(mech, user, pass string) (sasl.Mechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(mech)) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("broker: sasl.mechanism.inter.broker.protocol %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
}

// InterBrokerAddr is this broker's advertised address on the
// inter-broker listener once started, "" before.
func (b *Broker) InterBrokerAddr() string {
	select {
	case <-b.ready: // b.listeners is set before ready closes
	default:
		return ""
	}
	return hostPort(b.advertised())
}

// InterBrokerClientOpts are the kgo options a client in the broker's
// process (the console's inspector) uses to reach InterBrokerAddr with
// the broker's own credentials.
func (b *Broker) InterBrokerClientOpts() ([]kgo.Opt, error) { return b.interBrokerOpts() }
