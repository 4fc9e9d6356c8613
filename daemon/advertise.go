package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/vltava/vltava/core/config"
)

// listenerParts splits a listener "PLAINTEXT://host:port" (or "host:port")
// into its protocol prefix ("PLAINTEXT://" or ""), host and port.
func listenerParts(l string) (prefix, host, port string, err error) {
	l = strings.TrimSpace(l)
	addr := l
	if name, rest, ok := strings.Cut(l, "://"); ok {
		prefix, addr = name+"://", rest
	}
	host, port, err = net.SplitHostPort(addr)
	return prefix, host, port, err
}

// listenerName is the name of a listener entry: its prefix, PLAINTEXT
// for a bare host:port.
func listenerName(l string) string {
	if name, _, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
		return strings.ToUpper(strings.TrimSpace(name))
	}
	return config.ProtocolPlaintext
}

func firstOf(list string) string { return strings.TrimSpace(strings.Split(list, ",")[0]) }

// followListen is the advertised listener when --listen replaces the
// config file's listeners: an advertised listener the file derived from its
// listener (same port) moves to --listen's port, keeping its host; one with
// a port of its own (a NAT, a proxy) stays.
func followListen(fileListeners, fileAdvertised, listeners string) (adv, note string, err error) {
	_, _, filePort, err1 := listenerParts(firstOf(fileListeners))
	prefix, advHost, advPort, err2 := listenerParts(firstOf(fileAdvertised))
	_, _, newPort, err3 := listenerParts(firstOf(listeners))
	if err1 != nil || err2 != nil || err3 != nil || advPort != filePort || newPort == filePort {
		return fileAdvertised, "", nil
	}
	// The other advertised entries stay for the listeners --listen
	// keeps; those of listeners it dropped (a stock file's CONTROLLER)
	// go with them.
	names := map[string]bool{}
	for _, l := range config.SplitList(listeners) {
		names[listenerName(l)] = true
	}
	adv = prefix + net.JoinHostPort(advHost, newPort)
	for _, a := range config.SplitList(fileAdvertised)[1:] {
		if names[listenerName(a)] {
			adv += "," + a
		}
	}
	return adv, fmt.Sprintf("advertised.listeners %s from the config file follows --listen to %s (give --advertised to choose)",
		firstOf(fileAdvertised), firstOf(adv)), nil
}

// unspecified reports whether host means "every interface" (0.0.0.0, ::
// or empty), which a client cannot connect to.
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// advertise returns the effective advertised.listeners. When it is unset,
// every listener is advertised as it is bound (one on port 0 is left
// out: only binding settles its port, and the broker advertises what it
// bound); a listener bound to every interface (0.0.0.0, ::, or no host)
// is advertised as this machine's first non-loopback address, and the
// note says so. An explicit advertised listener that is not routable is
// an error, as in Kafka.
func advertise(cfg config.Broker) (adv, note string, err error) {
	if roles, _ := cfg.Roles(); !roles.Broker {
		return cfg.AdvertisedListeners, "", nil
	}
	if cfg.AdvertisedListeners != "" {
		for _, l := range strings.Split(cfg.AdvertisedListeners, ",") {
			_, host, _, err := listenerParts(l)
			if err == nil && unspecified(host) {
				return "", "", fmt.Errorf("advertised.listeners %q: %q is not an address clients can connect to; "+
					"advertise a host name or address of this machine", cfg.AdvertisedListeners, strings.TrimSpace(l))
			}
		}
		return cfg.AdvertisedListeners, "", nil
	}
	var out, wild []string
	var scope string
	for _, l := range config.SplitList(cfg.Listeners) {
		prefix, host, port, err := listenerParts(l)
		if err != nil {
			return "", "", fmt.Errorf("listeners %q: %w", cfg.Listeners, err)
		}
		switch {
		case port == "0":
			// The port is known once bound: the broker advertises
			// what it bound (core/broker, endpoint).
		case unspecified(host):
			var ip string
			ip, scope = outwardAddress()
			out = append(out, prefix+net.JoinHostPort(ip, port))
			wild = append(wild, l)
		default:
			out = append(out, l)
		}
	}
	adv = strings.Join(out, ",")
	if len(wild) == 0 {
		return adv, "", nil
	}
	verb := "binds"
	if len(wild) > 1 {
		verb = "bind"
	}
	return adv, fmt.Sprintf("listeners %s %s every interface; advertising %s, %s (set advertised.listeners to choose)",
		strings.Join(wild, ","), verb, adv, scope), nil
}

// outwardAddress is this machine's first non-loopback unicast address
// (IPv4 preferred), or the loopback address when there is none.
func outwardAddress() (ip, scope string) {
	addrs, _ := net.InterfaceAddrs()
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String(), "this machine's first non-loopback address"
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	if v6 != "" {
		return v6, "this machine's first non-loopback address"
	}
	return "127.0.0.1", "the loopback address, as this machine has no other (only local clients can connect)"
}
