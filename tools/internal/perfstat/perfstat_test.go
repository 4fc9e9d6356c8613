package perfstat

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	// Each value maps into its bucket's range, and bucket indexes never
	// decrease as values grow.
	prev := -1
	for _, us := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 + 12345, math.MaxUint64} {
		b := bucket(us)
		if b < prev || b >= numBuckets {
			t.Fatalf("bucket(%d) = %d after %d (numBuckets %d)", us, b, prev, numBuckets)
		}
		prev = b
		mid := bucketMid(b)
		if us >= linear && (float64(mid) < float64(us)*0.98 || float64(mid) > float64(us)*1.02) {
			t.Errorf("bucketMid(bucket(%d)) = %d: more than 2%% away", us, mid)
		}
		if us < linear && mid != us {
			t.Errorf("bucketMid(bucket(%d)) = %d", us, mid)
		}
	}
}

func TestQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	near := func(name string, got, want time.Duration) {
		t.Helper()
		if diff := math.Abs(float64(got - want)); diff > 0.02*float64(want) {
			t.Errorf("%s = %v, want about %v", name, got, want)
		}
	}
	near("p50", h.Quantile(0.5), 500*time.Millisecond)
	near("p99", h.Quantile(0.99), 990*time.Millisecond)
	near("p99.9", h.Quantile(0.999), 999*time.Millisecond)
	if h.Max() != time.Second {
		t.Errorf("max = %v, want 1s", h.Max())
	}
	near("mean", h.Mean(), 500500*time.Microsecond)
	if h.Count() != 1000 {
		t.Errorf("count = %d", h.Count())
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram reports non-zero figures")
	}
}

func TestMeterIntervalsAddUpToTotal(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := NewMeter(t0, true)
	m.Add(10, 10<<20, 2*time.Millisecond)
	first := m.Interval(t0.Add(time.Second))
	m.Add(30, 30<<20, 4*time.Millisecond)
	second := m.Interval(t0.Add(2 * time.Second))
	total := m.Total(t0.Add(2 * time.Second))

	if first.Records != 10 || second.Records != 30 || total.Records != 40 {
		t.Fatalf("records: first %d second %d total %d", first.Records, second.Records, total.Records)
	}
	if first.MBPerSec != 10 || total.MBPerSec != 20 || total.RecordsPerSec != 20 {
		t.Errorf("rates: first %.1f MB/s, total %.1f MB/s %.1f rec/s", first.MBPerSec, total.MBPerSec, total.RecordsPerSec)
	}
	if total.Latency == nil || total.Latency.MaxMs != 4 || math.Abs(total.Latency.P50Ms-2) > 0.04 {
		t.Errorf("latency = %+v", total.Latency)
	}
	if !strings.Contains(total.String(), "40 records") {
		t.Errorf("String() = %q", total.String())
	}
	if NewMeter(t0, false).Total(t0.Add(time.Second)).Latency != nil {
		t.Error("meter without latency reported latency")
	}
}
