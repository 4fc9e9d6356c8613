package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/core/follow"
	"github.com/vltava/vltava/plugins/sdk"
)

// Values maps quota kinds to bounds.
type Values map[Kind]float64

// Config sizes the measurement windows (Kafka's quota.window.num and
// quota.window.size.seconds).
type Config struct {
	Windows    int           // 11 when zero
	WindowSize time.Duration // 1s when zero
}

// table is one immutable snapshot of every configured quota.
type table struct {
	byEntity map[Entity]Values
	kinds    map[Kind]bool // kinds set on at least one entity
}

// sensorKey names one measured rate.
type sensorKey struct {
	kind   Kind
	entity Entity
}

type sensor struct {
	mu       sync.Mutex
	r        *rate
	lastUsed time.Time
	throttle time.Duration // total throttle imposed, for monitoring
}

// Manager holds the configured quotas and the measured rates, and says
// how long to throttle each request.
type Manager struct {
	cfg   Config
	table atomic.Pointer[table]

	mu        sync.Mutex
	sensors   map[sensorKey]*sensor
	lastSweep time.Time
}

// New returns a manager with no quotas.
func New(cfg Config) *Manager {
	if cfg.Windows <= 1 {
		cfg.Windows = 11
	}
	if cfg.WindowSize <= 0 {
		cfg.WindowSize = time.Second
	}
	m := &Manager{cfg: cfg, sensors: map[sensorKey]*sensor{}}
	m.table.Store(&table{byEntity: map[Entity]Values{}, kinds: map[Kind]bool{}})
	return m
}

// Set replaces every quota with quotas.
func (m *Manager) Set(quotas map[Entity]Values) {
	t := &table{byEntity: make(map[Entity]Values, len(quotas)), kinds: map[Kind]bool{}}
	for e, vs := range quotas {
		if len(vs) == 0 {
			continue
		}
		t.byEntity[e] = vs
		for k := range vs {
			t.kinds[k] = true
		}
	}
	m.table.Store(t)
}

// Quotas returns the configured quotas (a copy).
func (m *Manager) Quotas() map[Entity]Values {
	t := m.table.Load()
	out := make(map[Entity]Values, len(t.byEntity))
	for e, vs := range t.byEntity {
		c := make(Values, len(vs))
		for k, v := range vs {
			c[k] = v
		}
		out[e] = c
	}
	return out
}

// Resolve returns the bound that applies to kind for user and client,
// the entity it was set on, and whether any applies.
func (m *Manager) Resolve(kind Kind, user, client string) (bound float64, set Entity, ok bool) {
	bound, set, _, ok = m.resolve(m.table.Load(), kind, user, client)
	return bound, set, ok
}

func (m *Manager) resolve(t *table, kind Kind, user, client string) (float64, Entity, Entity, bool) {
	for _, c := range candidates(user, client) {
		if v, ok := t.byEntity[c[0]][kind]; ok {
			return v, c[0], c[1], true
		}
	}
	return 0, Entity{}, Entity{}, false
}

// Record adds amount (bytes, or for RequestPercentage the handling time
// in seconds × 100) for a request of user and client at now, and returns
// how long the client must be throttled: zero while it is within its
// quota, or when no quota of that kind applies to it.
func (m *Manager) Record(kind Kind, user, client string, amount float64, now time.Time) time.Duration {
	t := m.table.Load()
	if !t.kinds[kind] {
		return 0 // the common case: one atomic load, no lock
	}
	bound, _, measured, ok := m.resolve(t, kind, user, client)
	if !ok {
		return 0
	}
	s := m.sensor(sensorKey{kind, measured}, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = now
	s.r.record(amount, now)
	if bound <= 0 {
		// A zero quota blocks the entity: the longest throttle every time.
		d := time.Duration(m.cfg.Windows) * m.cfg.WindowSize
		s.throttle += d
		return d
	}
	perSec, span := s.r.measure(now)
	if perSec <= bound {
		return 0
	}
	d := time.Duration((perSec - bound) / bound * float64(span))
	if max := time.Duration(m.cfg.Windows) * m.cfg.WindowSize; d > max {
		d = max
	}
	s.throttle += d
	return d
}

// sweepEvery is how often idle sensors are dropped; one unused for an
// hour goes, as Kafka's do, so memory follows the clients still active.
const (
	sweepEvery = time.Minute
	idleSensor = time.Hour
)

func (m *Manager) sensor(k sensorKey, now time.Time) *sensor {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.lastSweep) > sweepEvery {
		m.lastSweep = now
		for key, s := range m.sensors {
			if s.mu.TryLock() {
				idle := now.Sub(s.lastUsed) > idleSensor
				s.mu.Unlock()
				if idle {
					delete(m.sensors, key)
				}
			}
		}
	}
	s := m.sensors[k]
	if s == nil {
		s = &sensor{r: newRate(m.cfg.Windows, m.cfg.WindowSize), lastUsed: now}
		m.sensors[k] = s
	}
	return s
}

// Throttled is one entity's measured figures, for monitoring.
type Throttled struct {
	Kind     Kind
	Entity   Entity
	Rate     float64       // per second, now
	Throttle time.Duration // total imposed since the sensor was made
}

// Sensors returns the figures of every live sensor.
func (m *Manager) Sensors(now time.Time) []Throttled {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Throttled, 0, len(m.sensors))
	for k, s := range m.sensors {
		s.mu.Lock()
		r, _ := s.r.measure(now)
		out = append(out, Throttled{Kind: k.kind, Entity: k.entity, Rate: r, Throttle: s.throttle})
		s.mu.Unlock()
	}
	return out
}

// Decode parses a stored quota value.
func Decode(b []byte) (Values, error) {
	var raw map[string]float64
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("quota: bad value: %w", err)
	}
	vs := make(Values, len(raw))
	for k, v := range raw {
		vs[Kind(k)] = v
	}
	return vs, nil
}

// Encode renders a quota value for the store.
func Encode(vs Values) []byte {
	b, _ := json.Marshal(vs) // a map of string to float: cannot fail
	return b
}

// Follow keeps the manager's quotas equal to the store's until ctx ends:
// it lists the prefix, then applies the watch's changes, listing again
// after any watch error. It returns when ctx is done; the caller owns the
// goroutine that runs it.
func (m *Manager) Follow(ctx context.Context, store sdk.MetadataStore, log *slog.Logger) {
	type stored struct {
		e  Entity
		vs Values
	}
	follow.Prefix(ctx, store, Prefix, "quota", log,
		func(key string, value []byte) (stored, error) {
			e, vs, err := parseKV(key, value)
			return stored{e, vs}, err
		},
		func(cur map[string]stored) {
			t := make(map[Entity]Values, len(cur))
			for _, s := range cur {
				t[s.e] = s.vs
			}
			m.Set(t)
		})
}

func parseKV(key string, value []byte) (Entity, Values, error) {
	e, err := ParseKey(key)
	if err != nil {
		return Entity{}, nil, err
	}
	vs, err := Decode(value)
	return e, vs, err
}
