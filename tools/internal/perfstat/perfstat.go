// Package perfstat measures throughput and latency for the perf commands:
// a Meter counts records and bytes and keeps latency histograms for the
// whole run and for the current reporting interval.
package perfstat

import (
	"fmt"
	"math/bits"
	"sync"
	"time"
)

// subBits is the number of significant bits a histogram bucket keeps, so a
// quantile is within 1/2^(subBits-1) (about 1.6%) of the true value.
const subBits = 7

const (
	linear     = 1 << subBits // values below this have their own bucket
	half       = linear / 2   // buckets per power of two above linear
	numBuckets = linear + (64-subBits)*half
)

// Histogram counts durations in log-linear buckets of microseconds. The zero
// value is empty and ready to use. It is not safe for concurrent use.
type Histogram struct {
	counts [numBuckets]uint64
	n      uint64
	sumUs  uint64
	maxUs  uint64
}

func bucket(us uint64) int {
	if us < linear {
		return int(us)
	}
	e := bits.Len64(us) - subBits // us>>e is in [half, linear)
	return linear + (e-1)*half + int(us>>e) - half
}

// bucketMid is the middle of bucket i's range, in microseconds.
func bucketMid(i int) uint64 {
	if i < linear {
		return uint64(i)
	}
	e := (i-linear)/half + 1
	low := uint64((i-linear)%half+half) << e
	return low + (uint64(1)<<e)/2
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	us := uint64(max(d.Microseconds(), 0))
	h.counts[bucket(us)]++
	h.n++
	h.sumUs += us
	h.maxUs = max(h.maxUs, us)
}

// Count is the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest duration recorded.
func (h *Histogram) Max() time.Duration { return time.Duration(h.maxUs) * time.Microsecond }

// Mean is the average duration, or 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sumUs/h.n) * time.Microsecond
}

// Quantile returns the duration at quantile q in [0, 1], or 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketMid(i), h.maxUs)) * time.Microsecond
		}
	}
	return h.Max()
}

// Merge adds o's counts into h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sumUs += o.sumUs
	h.maxUs = max(h.maxUs, o.maxUs)
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	AvgMs  float64 `json:"avg_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Summary is the histogram's average, p50, p99, p99.9 and maximum.
func (h *Histogram) Summary() Latency {
	return Latency{AvgMs: ms(h.Mean()), P50Ms: ms(h.Quantile(0.5)), P99Ms: ms(h.Quantile(0.99)),
		P999Ms: ms(h.Quantile(0.999)), MaxMs: ms(h.Max())}
}

// Report is the figures for one interval or a whole run.
type Report struct {
	Records       int64    `json:"records"`
	Bytes         int64    `json:"bytes"`
	Seconds       float64  `json:"seconds"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	Latency       *Latency `json:"latency,omitempty"`
}

// String formats the report as one human-readable line.
func (r Report) String() string {
	s := fmt.Sprintf("%d records, %.1f records/s, %.2f MB/s", r.Records, r.RecordsPerSec, r.MBPerSec)
	if r.Latency != nil {
		l := r.Latency
		s += fmt.Sprintf(", latency avg %.2f ms, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms",
			l.AvgMs, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
	}
	return s
}

// Meter accumulates records, bytes and (optionally) latencies from many
// goroutines. Interval and Total read it.
type Meter struct {
	mu                     sync.Mutex
	start, lastTick        time.Time
	records, bytes         int64
	tickRecords, tickBytes int64
	total, tick            Histogram
	withLatency            bool
	lastAdd                time.Time // when Add last counted records
}

// NewMeter starts a meter at now; withLatency adds latency figures to its
// reports.
func NewMeter(now time.Time, withLatency bool) *Meter {
	return &Meter{start: now, lastTick: now, withLatency: withLatency}
}

// Add counts records and bytes, and latency when the meter has latencies.
func (m *Meter) Add(records, bytes int64, latency time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records += records
	m.bytes += bytes
	if records > 0 {
		m.lastAdd = time.Now()
	}
	if m.withLatency {
		m.tick.Record(latency)
	}
}

// LastAdd is when Add last counted records (zero if never): a run that
// ends by waiting in vain should end its figures there, not after the wait.
func (m *Meter) LastAdd() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastAdd
}

// Records is the number of records counted so far.
func (m *Meter) Records() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records
}

// Interval reports on what was added since the previous Interval call (or
// the start) and starts a new interval at now.
func (m *Meter) Interval(now time.Time) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.reportLocked(m.records-m.tickRecords, m.bytes-m.tickBytes, now.Sub(m.lastTick), &m.tick)
	m.total.Merge(&m.tick)
	m.tick = Histogram{}
	m.tickRecords, m.tickBytes, m.lastTick = m.records, m.bytes, now
	return r
}

// Total reports on everything since the start, up to now.
func (m *Meter) Total(now time.Time) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all Histogram
	all.Merge(&m.total)
	all.Merge(&m.tick)
	return m.reportLocked(m.records, m.bytes, now.Sub(m.start), &all)
}

func (m *Meter) reportLocked(records, bytes int64, d time.Duration, h *Histogram) Report {
	r := Report{Records: records, Bytes: bytes, Seconds: d.Seconds()}
	if d > 0 {
		r.RecordsPerSec = float64(records) / d.Seconds()
		r.MBPerSec = float64(bytes) / (1 << 20) / d.Seconds()
	}
	if m.withLatency {
		l := h.Summary()
		r.Latency = &l
	}
	return r
}
