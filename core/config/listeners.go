package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Listener security protocols (Kafka's names).
const (
	ProtocolPlaintext     = "PLAINTEXT"      // no TLS, no authentication
	ProtocolSSL           = "SSL"            // TLS; a client certificate, if any, names the principal
	ProtocolSASLPlaintext = "SASL_PLAINTEXT" // SASL authentication, no TLS
	ProtocolSASLSSL       = "SASL_SSL"       // TLS, then SASL authentication
)

// Listener is one entry of listeners, with its security protocol and the
// address it advertises.
type Listener struct {
	// Name is the listener name ("PLAINTEXT", "INTERNAL"), upper case.
	Name string
	// Protocol is the security protocol, one of the Protocol constants.
	Protocol string
	// Addr is the host:port to bind.
	Addr string
	// AdvertisedHost and AdvertisedPort are what the broker registers for
	// this listener; AdvertisedPort is 0 when advertised.listeners does
	// not name the listener (the bound address is advertised then).
	AdvertisedHost string
	AdvertisedPort int32
}

// TLS reports whether the listener's protocol runs over TLS.
func (l Listener) TLS() bool { return l.Protocol == ProtocolSSL || l.Protocol == ProtocolSASLSSL }

// SASL reports whether the listener's protocol requires SASL.
func (l Listener) SASL() bool {
	return l.Protocol == ProtocolSASLPlaintext || l.Protocol == ProtocolSASLSSL
}

// IsTLSProtocol and IsSASLProtocol classify a security protocol name.
func IsTLSProtocol(p string) bool  { return Listener{Protocol: p}.TLS() }
func IsSASLProtocol(p string) bool { return Listener{Protocol: p}.SASL() }

func knownProtocol(p string) bool {
	switch p {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	}
	return false
}

// ProtocolMap parses listener.security.protocol.map ("INTERNAL:SSL,
// EXTERNAL:SASL_SSL"). As in Kafka, a listener named after a protocol
// uses that protocol unless the map says otherwise.
func (b Broker) ProtocolMap() (map[string]string, error) {
	m := map[string]string{}
	for _, p := range []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL} {
		m[p] = p
	}
	for _, e := range SplitList(b.ListenerSecurityProtocolMap) {
		name, proto, ok := strings.Cut(e, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" || !knownProtocol(proto) {
			return nil, fmt.Errorf("config: listener.security.protocol.map: entry %q: want NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", e)
		}
		m[name] = proto
	}
	return m, nil
}

// splitListener parses "NAME://host:port" or a bare "host:port" (named
// PLAINTEXT).
func splitListener(key, e string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(e, "://")
	if !ok {
		name, addr = ProtocolPlaintext, e
	}
	name = strings.ToUpper(strings.TrimSpace(name))
	if name == "" {
		return "", "", fmt.Errorf("config: %s: entry %q: empty listener name", key, e)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("config: %s: entry %q: %w", key, e, err)
	}
	return name, addr, nil
}

// ParseListeners parses listeners with listener.security.protocol.map and
// advertised.listeners. Names must be unique and mapped to a protocol;
// an advertised entry must name a listener and give a host and a port.
func (b Broker) ParseListeners() ([]Listener, error) {
	pm, err := b.ProtocolMap()
	if err != nil {
		return nil, err
	}
	entries := SplitList(b.Listeners)
	if len(entries) == 0 {
		return nil, fmt.Errorf("config: listeners: empty")
	}
	var out []Listener
	index := map[string]int{}
	for _, e := range entries {
		name, addr, err := splitListener("listeners", e)
		if err != nil {
			return nil, err
		}
		proto, ok := pm[name]
		if !ok {
			return nil, fmt.Errorf("config: listeners: listener %s has no security protocol in listener.security.protocol.map", name)
		}
		if _, dup := index[name]; dup {
			return nil, fmt.Errorf("config: listeners: listener name %s used twice", name)
		}
		index[name] = len(out)
		out = append(out, Listener{Name: name, Protocol: proto, Addr: addr})
	}
	for _, e := range SplitList(b.AdvertisedListeners) {
		name, addr, err := splitListener("advertised.listeners", e)
		if err != nil {
			return nil, err
		}
		i, ok := index[name]
		if !ok {
			if len(out) == 1 && !strings.Contains(e, "://") {
				i = 0 // a bare host:port advertises the only listener
			} else {
				return nil, fmt.Errorf("config: advertised.listeners: %s is not among the listeners", name)
			}
		}
		host, port, _ := net.SplitHostPort(addr)
		n, err := strconv.ParseInt(port, 10, 32)
		if err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("config: advertised.listeners: entry %q: bad port", e)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return nil, fmt.Errorf("config: advertised.listeners: entry %q: a wildcard is not an address clients can connect to; advertise a host name or address of this machine", e)
		}
		out[i].AdvertisedHost, out[i].AdvertisedPort = host, int32(n)
	}
	return out, nil
}

// InterBrokerListener is the listener other brokers connect to:
// inter.broker.listener.name, or the first listener when it is empty.
func (b Broker) InterBrokerListener() (Listener, error) {
	ls, err := b.ParseListeners()
	if err != nil {
		return Listener{}, err
	}
	name := strings.ToUpper(strings.TrimSpace(b.InterBrokerListenerName))
	if name == "" {
		return ls[0], nil
	}
	for _, l := range ls {
		if l.Name == name {
			return l, nil
		}
	}
	return Listener{}, fmt.Errorf("config: inter.broker.listener.name: %s is not among the listeners", name)
}

// HasSASLListener reports whether a listener requires SASL.
func (b Broker) HasSASLListener() bool {
	ls, _ := b.ParseListeners()
	for _, l := range ls {
		if l.SASL() {
			return true
		}
	}
	return false
}
