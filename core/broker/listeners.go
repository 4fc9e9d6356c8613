package broker

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

// Listeners (issue 10). Every entry of listeners is bound and served by
// the one wire.Server (so connection limits and the request pool are
// broker-wide), each with its name and security protocol: TLS listeners
// (SSL, SASL_SSL) complete a TLS handshake first and, with a verified
// client certificate, act as the principal its subject maps to; SASL
// listeners (SASL_PLAINTEXT, SASL_SSL) then require SASL authentication
// (sasl.go), with frames capped at sasl.server.max.receive.size until
// then. The broker registers every listener's advertised address;
// Metadata, FindCoordinator and DescribeCluster answer a client with the
// addresses of the listener it is connected to, and brokers reach each
// other on inter.broker.listener.name.

// boundListener is one bound listener.
type boundListener struct {
	cfg  config.Listener
	ln   net.Listener
	wire wire.ListenerConfig
}

// bindListeners builds the listeners' TLS and binds every listener.
func (b *Broker) bindListeners() error {
	ls, err := b.cfg.ParseListeners() // validated in New
	if err != nil {
		return err
	}
	// As in Kafka (before KIP-684's listener-prefixed keys, which Vltava
	// does not read), ssl.client.auth applies to SSL listeners; SASL_SSL
	// listeners authenticate with SASL and ask for no certificate.
	serverTLS := map[string]*tls.Config{}
	var rules tlsconf.Rules
	for _, l := range ls {
		if !l.TLS() || serverTLS[l.Protocol] != nil {
			continue
		}
		auth := b.cfg.ClientAuth()
		if l.SASL() {
			auth = config.ClientAuthNone
		}
		c, err := tlsconf.FilesOf(b.cfg).Server(auth)
		if err != nil {
			return fmt.Errorf("broker: listener %s: %w", l.Name, err)
		}
		serverTLS[l.Protocol] = c
		if rules, err = tlsconf.ParseRules(b.cfg.SslPrincipalMappingRules); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	certPrincipal := func(c *x509.Certificate) (sdk.Principal, error) {
		name, err := rules.PrincipalName(c)
		if err != nil {
			return sdk.Principal{}, err
		}
		return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: name}, nil
	}
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("broker: listen %s (%s): %w", l.Addr, l.Name, err)
		}
		bl := boundListener{cfg: l, ln: ln, wire: wire.ListenerConfig{Name: l.Name, Protocol: l.Protocol}}
		if l.TLS() {
			bl.wire.TLS, bl.wire.Principal = serverTLS[l.Protocol], certPrincipal
		}
		if l.SASL() {
			bl.wire.PreAuthMaxRequestBytes = b.cfg.SaslServerMaxReceiveSize
		}
		b.listeners = append(b.listeners, bl)
		if b.ln == nil {
			b.ln = ln
		}
	}
	return nil
}

// serveListeners serves every bound listener; the goroutines end when the
// server closes.
func (b *Broker) serveListeners() {
	for _, bl := range b.listeners {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := b.server.ServeListener(bl.ln, bl.wire); err != nil && !b.closed.Load() {
				b.logger.Error("broker: serve", "listener", bl.cfg.Name, "err", err)
			}
		}()
	}
}

// closeListeners closes the bound listeners not yet served.
func (b *Broker) closeListeners() {
	for _, bl := range b.listeners {
		bl.ln.Close()
	}
}

// endpoint is where clients reach a bound listener: its advertised
// address if configured, else the bound one (so port 0 works), with a
// wildcard host replaced by the bound IP.
func (bl boundListener) endpoint() cluster.Endpoint {
	e := cluster.Endpoint{Name: bl.cfg.Name, Protocol: bl.cfg.Protocol}
	if bl.cfg.AdvertisedPort != 0 {
		e.Host, e.Port = bl.cfg.AdvertisedHost, bl.cfg.AdvertisedPort
		return e
	}
	host, _, _ := net.SplitHostPort(bl.cfg.Addr)
	if a, ok := bl.ln.Addr().(*net.TCPAddr); ok {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = a.IP.String()
		}
		e.Port = int32(a.Port)
	}
	e.Host = host
	return e
}

// endpoints lists the advertised address of every listener.
func (b *Broker) endpoints() []cluster.Endpoint {
	out := make([]cluster.Endpoint, 0, len(b.listeners))
	for _, bl := range b.listeners {
		out = append(out, bl.endpoint())
	}
	return out
}

// advertised is the inter-broker listener's advertised host and port,
// which the broker registers as its address.
func (b *Broker) advertised() (string, int32) {
	ib, _ := b.cfg.InterBrokerListener() // validated in New
	for _, bl := range b.listeners {
		if bl.cfg.Name == ib.Name {
			e := bl.endpoint()
			return e.Host, e.Port
		}
	}
	return ib.AdvertisedHost, ib.AdvertisedPort
}

// endpointFor is the address a client on conn is told for broker bi: bi's
// endpoint on the listener conn arrived on, as Kafka answers. ok is false
// when bi has no such listener (Kafka leaves such brokers out).
func endpointFor(bi cluster.BrokerInfo, conn *wire.ConnInfo) (host string, port int32, ok bool) {
	if conn == nil || conn.Listener == "" {
		return bi.Host, bi.Port, true
	}
	return bi.Endpoint(conn.Listener)
}

// ListenerAddr is the bound address of the named listener ("" if none).
func (b *Broker) ListenerAddr(name string) string {
	for _, bl := range b.listeners {
		if bl.cfg.Name == name {
			return bl.ln.Addr().String()
		}
	}
	return ""
}

// hostPort joins a host and port.
func hostPort(host string, port int32) string { return net.JoinHostPort(host, strconv.Itoa(int(port))) }
