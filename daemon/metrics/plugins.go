package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vltava/vltava/plugins/host"
)

var posInf = math.Inf(1)

var (
	pluginUp = prometheus.NewDesc("vltava_plugin_up",
		"1 while the plugin's process is up, 0 while it is down or restarting.", []string{"kind", "name"}, nil)
	pluginRestarts = prometheus.NewDesc("vltava_plugin_restarts_total",
		"Times the supervisor restarted the plugin's process.", []string{"kind", "name"}, nil)
	pluginCalls = prometheus.NewDesc("vltava_plugin_calls_total",
		"sdk calls made to the plugin.", []string{"kind", "name"}, nil)
)

// pluginCollector reports the plugin host's supervision counters.
type pluginCollector struct{ s *Server }

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pluginUp
	ch <- pluginRestarts
	ch <- pluginCalls
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.s.plugins.Load()
	if h == nil {
		return
	}
	for _, p := range h.Plugins() {
		kind, name := p.Spec().Kind, pluginName(p)
		up := 0.0
		if p.Pid() > 0 {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(pluginUp, prometheus.GaugeValue, up, kind, name)
		ch <- prometheus.MustNewConstMetric(pluginRestarts, prometheus.CounterValue, float64(p.Restarts()), kind, name)
		ch <- prometheus.MustNewConstMetric(pluginCalls, prometheus.CounterValue, float64(p.Calls()), kind, name)
	}
}

func pluginName(p *host.Plugin) string { return p.Name() }
