// Package metrics serves a broker's operational HTTP endpoints on
// metrics.listen (default 127.0.0.1:9644):
//
//	/metrics   Prometheus text exposition (client_golang)
//	/healthz   200 while the process serves HTTP at all (liveness)
//	/readyz    200 once the broker has started, registered with the
//	           metadata store and caught up with it; 503 before (readiness)
//
// Every figure is pulled when Prometheus scrapes: collectors read the
// broker's counters and the kernel's /proc files (prometheus/procfs) at
// scrape time, so serving metrics costs the produce and fetch paths
// nothing beyond the atomic counters the broker keeps anyway.
//
// # Metric families
//
// Process figures, one series per process (label process="broker" for
// vltavad itself, "plugin/<kind>/<name>" for each plugin process):
//
//	vltava_process_open_fds                 descriptors open now
//	vltava_process_max_fds{limit}           RLIMIT_NOFILE, limit="soft"|"hard"
//	vltava_process_resident_memory_bytes    RSS
//	vltava_process_cpu_seconds_total        user+system CPU
//	vltava_process_threads                  OS threads
//
// Plugins (plugins/host), labelled kind and name:
//
//	vltava_plugin_up                        1 while the process is up
//	vltava_plugin_restarts_total            restarts by the supervisor
//	vltava_plugin_calls_total               sdk calls made
//	vltava_plugin_call_duration_seconds     histogram, also by method
//
// The broker's own families (requests, bytes, partitions, groups) are
// listed in broker.go beside the collector that produces them. The
// alert rules and the Grafana dashboard under daemon/metrics/ops/ use
// only names defined here; a test checks that.
package metrics
