package metrics

import (
	"math"
	"sort"
	"time"
)

// PluginLatency estimates a plugin's call latency quantiles from the call
// histogram (all methods together), interpolating within buckets as
// Prometheus' histogram_quantile does. n is the number of calls observed.
func (s *Server) PluginLatency(kind, name string) (n uint64, p50, p99 time.Duration) {
	fams, err := s.reg.Gather()
	if err != nil {
		return 0, 0, 0
	}
	counts := map[float64]uint64{} // upper bound → cumulative count
	for _, f := range fams {
		if f.GetName() != "vltava_plugin_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] != kind || labels["name"] != name {
				continue
			}
			h := m.GetHistogram()
			n += h.GetSampleCount()
			for _, b := range h.GetBucket() {
				counts[b.GetUpperBound()] += b.GetCumulativeCount()
			}
			counts[math.Inf(1)] += h.GetSampleCount()
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	bounds := make([]float64, 0, len(counts))
	for b := range counts {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	q := func(q float64) time.Duration {
		rank := q * float64(n)
		lower, prev := 0.0, uint64(0)
		for _, b := range bounds {
			c := counts[b]
			if float64(c) >= rank {
				if math.IsInf(b, 1) {
					return time.Duration(lower * float64(time.Second))
				}
				frac := 0.0
				if c > prev {
					frac = (rank - float64(prev)) / float64(c-prev)
				}
				return time.Duration((lower + (b-lower)*frac) * float64(time.Second))
			}
			lower, prev = b, c
		}
		return time.Duration(lower * float64(time.Second))
	}
	return n, q(0.5), q(0.99)
}
