package wire

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxConnectionsCap bounds the max.connections derived from the
// descriptor limit: each open connection costs about 40 KiB (two
// goroutines, a 16 KiB read buffer) before any request, so 65,536 idle
// connections already hold well over 2 GiB.
const maxConnectionsCap = 65536

// DefaultMaxConnections is the max.connections used when none is
// configured: half of the process's open-file soft limit (the other half
// is left for log segments, their indexes, the metadata store and plugin
// sockets, so that a flood of connections cannot make the broker fail to
// open a segment), at least 64 and at most 65,536. Kafka's default is
// unlimited; Go raises the soft limit to the hard limit at startup on
// Linux, so this follows `ulimit -Hn`.
func DefaultMaxConnections() int {
	limit, ok := openFileLimit()
	if !ok || limit == 0 {
		return 1024
	}
	return int(max(64, min(limit/2, maxConnectionsCap)))
}

// remoteIP is the address a connection counts against in
// max.connections.per.ip; ok is false for non-IP transports.
func remoteIP(a net.Addr) (netip.Addr, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(ta.IP)
		return ip.Unmap(), ok
	}
	return netip.Addr{}, false
}

// connLimits counts open connections against max.connections and
// max.connections.per.ip. Its methods are called with Server.mu held.
type connLimits struct {
	max       int // <= 0: unlimited
	perIP     int // <= 0: unlimited
	overrides map[netip.Addr]int
	byIP      map[netip.Addr]int
}

// admitLocked reports why a new connection from ip must be refused, or ""
// and counts it. open is the number of connections open now.
func (l *connLimits) admitLocked(ip netip.Addr, hasIP bool, open int) string {
	if l.max > 0 && open >= l.max {
		return fmt.Sprintf("max.connections (%d) reached", l.max)
	}
	if !hasIP {
		return ""
	}
	limit, ok := l.overrides[ip]
	if !ok {
		limit = l.perIP
	}
	if (ok || limit > 0) && l.byIP[ip] >= limit {
		return fmt.Sprintf("max.connections.per.ip (%d) reached for %s", limit, ip)
	}
	l.byIP[ip]++
	return ""
}

// releaseLocked uncounts a connection admitted from ip.
func (l *connLimits) releaseLocked(ip netip.Addr, hasIP bool) {
	if !hasIP {
		return
	}
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

// logLimiter logs a recurring event at most once per interval, with the
// number of occurrences it did not log.
type logLimiter struct {
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// log writes msg unless one was written less than interval ago.
func (r *logLimiter) log(l *slog.Logger, level slog.Level, msg string, attrs ...any) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	r.last = now
	n := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	if n > 0 {
		attrs = append(attrs, "suppressed_since_last", n)
	}
	l.Log(context.Background(), level, msg, attrs...)
}
