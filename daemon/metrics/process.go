package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

var (
	procOpenFDs = prometheus.NewDesc("vltava_process_open_fds",
		"File descriptors the process has open.", []string{"process"}, nil)
	procMaxFDs = prometheus.NewDesc("vltava_process_max_fds",
		"The process's RLIMIT_NOFILE: limit is soft (what it may open) or hard (what the soft limit may be raised to).",
		[]string{"process", "limit"}, nil)
	procRSS = prometheus.NewDesc("vltava_process_resident_memory_bytes",
		"Resident set size.", []string{"process"}, nil)
	procCPU = prometheus.NewDesc("vltava_process_cpu_seconds_total",
		"User and system CPU time.", []string{"process"}, nil)
	procThreads = prometheus.NewDesc("vltava_process_threads",
		"OS threads.", []string{"process"}, nil)
)

// processCollector reports the broker's own process and each plugin
// process from /proc at scrape time.
type processCollector struct{ s *Server }

func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{procOpenFDs, procMaxFDs, procRSS, procCPU, procThreads} {
		ch <- d
	}
}

func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	if p, err := procfs.Self(); err == nil {
		collectProc(ch, p, "broker")
	}
	h := c.s.plugins.Load()
	if h == nil {
		return
	}
	for _, pl := range h.Plugins() {
		pid := pl.Pid()
		if pid <= 0 {
			continue // down: plugin_up says so
		}
		if p, err := procfs.NewProc(pid); err == nil {
			collectProc(ch, p, "plugin/"+pl.Spec().Kind+"/"+pl.Name())
		}
	}
}

// collectProc emits one process's figures; a process that exits during
// the scrape simply lacks the figures it could no longer give.
func collectProc(ch chan<- prometheus.Metric, p procfs.Proc, name string) {
	if n, err := p.FileDescriptorsLen(); err == nil {
		ch <- prometheus.MustNewConstMetric(procOpenFDs, prometheus.GaugeValue, float64(n), name)
	}
	var lim unix.Rlimit
	if err := unix.Prlimit(p.PID, unix.RLIMIT_NOFILE, nil, &lim); err == nil {
		ch <- prometheus.MustNewConstMetric(procMaxFDs, prometheus.GaugeValue, rlimitValue(lim.Cur), name, "soft")
		ch <- prometheus.MustNewConstMetric(procMaxFDs, prometheus.GaugeValue, rlimitValue(lim.Max), name, "hard")
	}
	if st, err := p.Stat(); err == nil {
		ch <- prometheus.MustNewConstMetric(procRSS, prometheus.GaugeValue, float64(st.ResidentMemory()), name)
		ch <- prometheus.MustNewConstMetric(procCPU, prometheus.CounterValue, st.CPUTime(), name)
		ch <- prometheus.MustNewConstMetric(procThreads, prometheus.GaugeValue, float64(st.NumThreads), name)
	}
}

// rlimitValue maps RLIM_INFINITY to +Inf.
func rlimitValue(v uint64) float64 {
	if v == unix.RLIM_INFINITY {
		return posInf
	}
	return float64(v)
}
