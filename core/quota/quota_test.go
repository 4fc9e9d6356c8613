package quota

import (
	"math"
	"testing"
	"time"
)

func named(s string) Part { return Named(s) }

var def = DefaultPart

func TestPrecedence(t *testing.T) {
	all := map[Entity]Values{
		{User: named("alice"), Client: named("app")}: {ProducerByteRate: 1},
		{User: named("alice"), Client: def}:          {ProducerByteRate: 2},
		{User: named("alice")}:                       {ProducerByteRate: 3},
		{User: def, Client: named("app")}:            {ProducerByteRate: 4},
		{User: def, Client: def}:                     {ProducerByteRate: 5},
		{User: def}:                                  {ProducerByteRate: 6},
		{Client: named("app")}:                       {ProducerByteRate: 7},
		{Client: def}:                                {ProducerByteRate: 8},
	}
	m := New(Config{})
	// Remove the most specific level one at a time: each time the next
	// level must win.
	order := []Entity{
		{User: named("alice"), Client: named("app")}, {User: named("alice"), Client: def}, {User: named("alice")},
		{User: def, Client: named("app")}, {User: def, Client: def}, {User: def}, {Client: named("app")}, {Client: def},
	}
	for i, e := range order {
		m.Set(all)
		b, set, ok := m.Resolve(ProducerByteRate, "alice", "app")
		if !ok || b != float64(i+1) || set != e {
			t.Errorf("level %d: got bound %v from %v (%v), want %v from %v", i+1, b, set, ok, i+1, e)
		}
		delete(all, e)
	}
	m.Set(all)
	if _, _, ok := m.Resolve(ProducerByteRate, "alice", "app"); ok {
		t.Error("a quota applies with none configured")
	}
}

func TestKindsResolveIndependently(t *testing.T) {
	m := New(Config{})
	m.Set(map[Entity]Values{
		{User: named("bob")}:   {ConsumerByteRate: 100},
		{Client: named("etl")}: {ProducerByteRate: 200},
	})
	if b, _, ok := m.Resolve(ProducerByteRate, "bob", "etl"); !ok || b != 200 {
		t.Errorf("producer quota = %v %v, want 200 from the client-id level", b, ok)
	}
	if b, _, ok := m.Resolve(ConsumerByteRate, "bob", "etl"); !ok || b != 100 {
		t.Errorf("consumer quota = %v %v, want 100 from the user level", b, ok)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	for _, e := range []Entity{
		{User: named("alice")}, {Client: named("a/b c")}, {User: def, Client: named("<default>")},
		{User: named("CN=x,O=y"), Client: def},
	} {
		got, err := ParseKey(e.Key())
		if err != nil || got != e {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", e.Key(), got, err, e)
		}
	}
	// A real name "<default>" must not read back as the default.
	e := Entity{Client: named("<default>")}
	if got, _ := ParseKey(e.Key()); got.Client.Default || got.Client.Name != "<default>" || e.Key() == (Entity{Client: def}).Key() {
		t.Errorf("the name <default> collides with the default: %q", e.Key())
	}
	for _, bad := range []string{"/client-quotas/", "/client-quotas/users", "/client-quotas/x/y", "/topics/a", "/client-quotas/users/%zz"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

// TestThrottleHoldsRate simulates a producer that sends as fast as it
// may, waiting out every throttle it is given: over a minute its rate
// must settle at the bound, whatever the request size.
func TestThrottleHoldsRate(t *testing.T) {
	for _, reqBytes := range []float64{16 << 10, 1 << 20} {
		m := New(Config{})
		const bound = 5e6
		m.Set(map[Entity]Values{{Client: named("p")}: {ProducerByteRate: bound}})
		now := time.Unix(1000, 0)
		var start time.Time
		var sent float64
		// The first window span allows a burst, as Kafka's does: measure
		// the steady state after it.
		for i := 0; now.Sub(time.Unix(1000, 0)) < 2*time.Minute; i++ {
			if start.IsZero() && now.Sub(time.Unix(1000, 0)) > 30*time.Second {
				start, sent = now, 0
			}
			sent += reqBytes
			d := m.Record(ProducerByteRate, "ANONYMOUS", "p", reqBytes, now)
			now = now.Add(time.Millisecond + d) // 1 ms per request, then the throttle
		}
		got := sent / now.Sub(start).Seconds()
		if math.Abs(got-bound)/bound > 0.1 {
			t.Errorf("%v-byte requests: held at %.0f B/s, want %.0f ± 10%%", reqBytes, got, bound)
		}
	}
}

func TestUnlimitedClientIsNotThrottled(t *testing.T) {
	m := New(Config{})
	m.Set(map[Entity]Values{{Client: named("slow")}: {ProducerByteRate: 1000}})
	now := time.Unix(1000, 0)
	for range 1000 {
		if d := m.Record(ProducerByteRate, "ANONYMOUS", "fast", 1<<20, now); d != 0 {
			t.Fatalf("a client without a quota was throttled %v", d)
		}
		now = now.Add(time.Millisecond)
	}
}

func TestDefaultQuotaIsPerClient(t *testing.T) {
	m := New(Config{})
	m.Set(map[Entity]Values{{Client: def}: {ProducerByteRate: 1e6}})
	now := time.Unix(1000, 0)
	// Client a uses its whole quota; b must still start unthrottled.
	for range 20 {
		m.Record(ProducerByteRate, "u", "a", 1e6, now)
		now = now.Add(100 * time.Millisecond)
	}
	if d := m.Record(ProducerByteRate, "u", "a", 1e6, now); d == 0 {
		t.Error("client a, at twice its quota, is not throttled")
	}
	if d := m.Record(ProducerByteRate, "u", "b", 1000, now); d != 0 {
		t.Errorf("client b shares a's default quota: throttled %v", d)
	}
}

func TestZeroQuotaBlocks(t *testing.T) {
	m := New(Config{Windows: 3, WindowSize: time.Second})
	m.Set(map[Entity]Values{{User: named("x")}: {ProducerByteRate: 0}})
	if d := m.Record(ProducerByteRate, "x", "c", 1, time.Unix(1, 0)); d != 3*time.Second {
		t.Errorf("zero quota throttle = %v, want the whole window span", d)
	}
}

func TestNoQuotasNoAllocation(t *testing.T) {
	m := New(Config{})
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { m.Record(ProducerByteRate, "u", "c", 100, now) }); n != 0 {
		t.Errorf("Record with no quotas allocates %v times", n)
	}
}
