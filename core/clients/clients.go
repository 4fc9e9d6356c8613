// Package clients records which client software talks to a broker and
// which Kafka APIs, at which versions, it uses: the data behind the
// client compatibility report (`vltava clients`, the console's Clients
// page).
//
// A client names its software in ApiVersions v3+ (KIP-511:
// "apache-kafka-java" "3.7.0", "sarama" ..., franz-go's "kgo"); older
// clients are recorded as "unknown". Each connection keeps a bitset of
// the (API key, version) pairs it has used, so only a pair's first use
// on a connection takes the registry's lock; every later request costs a
// bit test.
//
// Memory is bounded: at most MaxSoftware software entries (later ones are
// folded into "other"), and at most MaxClientIDs client ids each.
//
// Lock order: Registry.mu only; a Conn is used by its connection's
// requests, which a broker handles one at a time, and needs no lock.
package clients

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Limits on what a Registry keeps.
const (
	MaxSoftware  = 256
	MaxClientIDs = 64
	maxKey       = 128 // API keys recorded: 0..127
)

// Software names a client library and its version.
type Software struct {
	Name, Version string
}

// Unknown is the software of a client that did not name itself.
var Unknown = Software{"unknown", "unknown"}

// Usage is what one software version did, as a snapshot.
type Usage struct {
	Software
	ClientIDs   []string          `json:"client_ids"`
	Connections int64             `json:"connections"`       // open now
	Total       int64             `json:"connections_total"` // since the broker started
	APIs        map[int16][]int16 `json:"apis"`              // API key → versions used, ascending
	FirstSeen   time.Time         `json:"first_seen"`
	LastSeen    time.Time         `json:"last_seen"`
}

type entry struct {
	ids         map[string]struct{}
	open, total int64
	versions    [maxKey]uint64 // bit v set: version v of the key was used
	first, last time.Time
}

// Registry aggregates usage per software. The zero value is not usable;
// call New.
type Registry struct {
	mu         sync.Mutex
	bySoftware map[Software]*entry
}

// New returns an empty registry.
func New() *Registry { return &Registry{bySoftware: map[Software]*entry{}} }

// Conn is one connection's view: the software it named and the pairs it
// has used.
type Conn struct {
	r        *Registry
	sw       Software
	named    bool
	clientID string
	seen     [maxKey]uint64
	counted  bool
}

// Open starts tracking a connection.
func (r *Registry) Open() *Conn { return &Conn{r: r, sw: Unknown} }

// entryLocked returns sw's entry, folding new software into "other" past
// MaxSoftware. REQUIRES: r.mu.
func (r *Registry) entryLocked(sw Software, now time.Time) *entry {
	e := r.bySoftware[sw]
	if e == nil {
		if len(r.bySoftware) >= MaxSoftware {
			sw = Software{"other", "other"}
			if e = r.bySoftware[sw]; e != nil {
				return e
			}
		}
		e = &entry{ids: map[string]struct{}{}, first: now}
		r.bySoftware[sw] = e
	}
	return e
}

// Named records the software the client named in ApiVersions. A
// connection that names itself again keeps its first name.
func (c *Conn) Named(name, version string) {
	if c.named || name == "" {
		return
	}
	c.named = true
	sw := Software{name, version}
	if c.counted {
		// Already counted as unknown: move the open connection over.
		c.r.mu.Lock()
		if e := c.r.bySoftware[c.sw]; e != nil {
			e.open--
			e.total--
		}
		c.r.mu.Unlock()
		c.counted = false
		c.seen = [maxKey]uint64{}
	}
	c.sw = sw
}

// Used records one request of the connection.
func (c *Conn) Used(key, version int16, clientID string) {
	if key < 0 || key >= maxKey || version < 0 || version > 63 {
		return
	}
	bit := uint64(1) << uint(version)
	if c.counted && c.seen[key]&bit != 0 && clientID == c.clientID {
		return
	}
	c.seen[key] |= bit
	c.clientID = clientID
	now := time.Now()
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	e := c.r.entryLocked(c.sw, now)
	if !c.counted {
		c.counted = true
		e.open++
		e.total++
	}
	e.versions[key] |= bit
	e.last = now
	if _, ok := e.ids[clientID]; !ok && len(e.ids) < MaxClientIDs {
		e.ids[clientID] = struct{}{}
	}
}

// Closed ends the connection's tracking.
func (c *Conn) Closed() {
	if !c.counted {
		return
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if e := c.r.bySoftware[c.sw]; e != nil {
		e.open--
	}
	c.counted = false
}

// Snapshot returns every software's usage, sorted by name then version.
func (r *Registry) Snapshot() []Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Usage, 0, len(r.bySoftware))
	for sw, e := range r.bySoftware {
		u := Usage{Software: sw, Connections: e.open, Total: e.total, APIs: map[int16][]int16{}, FirstSeen: e.first, LastSeen: e.last}
		for id := range e.ids {
			u.ClientIDs = append(u.ClientIDs, id)
		}
		sort.Strings(u.ClientIDs)
		for k, bits := range e.versions {
			for v := int16(0); bits != 0; v++ {
				if bits&1 != 0 {
					u.APIs[int16(k)] = append(u.APIs[int16(k)], v)
				}
				bits >>= 1
			}
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// Affected lists the software that used version of key, and for each
// whether it used no other version of that key (so that removing the
// version leaves it nothing it is known to speak).
func Affected(us []Usage, key, version int16) (only, also []Usage) {
	for _, u := range us {
		vs := u.APIs[key]
		if !slices.Contains(vs, version) {
			continue
		}
		if len(vs) == 1 {
			only = append(only, u)
		} else {
			also = append(also, u)
		}
	}
	return only, also
}
