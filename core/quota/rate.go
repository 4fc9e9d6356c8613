package quota

import "time"

// rate is a sampled rate over a ring of fixed-length windows, measured
// as Kafka's Rate is: the total of the windows still in the span divided
// by the time they cover, where the time is stretched to at least
// (n-1) windows so that the first requests of a client are not measured
// over a few milliseconds and throttled for a burst.
//
// INVARIANT: samples[cur] is the newest window; the others are older or
// expired (start zero).
type rate struct {
	size    time.Duration
	samples []sample
	cur     int
}

type sample struct {
	start time.Time
	total float64
}

func newRate(n int, size time.Duration) *rate {
	return &rate{size: size, samples: make([]sample, n)}
}

// record adds v at now.
func (r *rate) record(v float64, now time.Time) {
	s := &r.samples[r.cur]
	if s.start.IsZero() || now.Sub(s.start) >= r.size {
		r.cur = (r.cur + 1) % len(r.samples)
		s = &r.samples[r.cur]
		*s = sample{start: now}
	}
	s.total += v
}

// measure returns the rate per second at now and the span it was
// measured over.
func (r *rate) measure(now time.Time) (perSec float64, span time.Duration) {
	span0 := time.Duration(len(r.samples)) * r.size
	var total float64
	var oldest time.Time
	for i := range r.samples {
		s := &r.samples[i]
		if s.start.IsZero() || now.Sub(s.start) >= span0 {
			*s = sample{} // expired
			continue
		}
		total += s.total
		if oldest.IsZero() || s.start.Before(oldest) {
			oldest = s.start
		}
	}
	if oldest.IsZero() {
		return 0, 0
	}
	span = now.Sub(oldest)
	if min := time.Duration(len(r.samples)-1) * r.size; span < min {
		span = min
	}
	return total / span.Seconds(), span
}
