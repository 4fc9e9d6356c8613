package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

// scrape fetches and parses /metrics.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestScrapeRealBroker runs vltavad with its metrics listener, writes to
// a topic, and checks what a Prometheus scrape sees: process figures for
// the broker and its plugin processes, the partition's log, request
// latencies, plugin supervision, and the health endpoints.
func TestScrapeRealBroker(t *testing.T) {
	bin := daemontest.Build(t)
	maddr := daemontest.FreePort(t)
	p := daemontest.Start(t, bin, "--metrics-listen", maddr)

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.DefaultProduceTopic("metered"), kgo.AllowAutoTopicCreation(), kgo.ClientID("metered-app"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A generous quota on the client, so that its sensor is reported.
	adm := kadm.NewClient(cl)
	app := "metered-app"
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1e9}},
	}}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("record-%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// A group that committed offset 5 of 20 lags by 15.
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: "metered", Partition: 0, At: 5, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "lagging", commit); err != nil {
		t.Fatal(err)
	}

	if code, _ := get(t, "http://"+maddr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := get(t, "http://"+maddr+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d", code)
	}

	// The broker follows quota changes through a store watch: produce to a
	// second topic until the client's quota sensor shows.
	fams := scrape(t, maddr)
	for deadline := time.Now().Add(15 * time.Second); fams["vltava_quota_rate"] == nil && time.Now().Before(deadline); fams = scrape(t, maddr) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "metered-quota", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	broker := map[string]string{"process": "broker"}
	if v, ok := value(fams, "vltava_process_open_fds", broker); !ok || v < 3 {
		t.Errorf("broker open fds = %v, %v; want a real count", v, ok)
	}
	soft, ok1 := value(fams, "vltava_process_max_fds", map[string]string{"process": "broker", "limit": "soft"})
	hard, ok2 := value(fams, "vltava_process_max_fds", map[string]string{"process": "broker", "limit": "hard"})
	if !ok1 || !ok2 || soft <= 0 || hard < soft {
		t.Errorf("broker fd limits soft=%v hard=%v (%v %v)", soft, hard, ok1, ok2)
	}
	if v, ok := value(fams, "vltava_process_resident_memory_bytes", broker); !ok || v < 1<<20 {
		t.Errorf("broker RSS = %v, %v", v, ok)
	}
	if v, ok := value(fams, "vltava_process_threads", broker); !ok || v < 1 {
		t.Errorf("broker threads = %v, %v", v, ok)
	}
	// The local metadata store runs as a plugin process of its own.
	store := map[string]string{"kind": "metastore", "name": "local"}
	if v, ok := value(fams, "vltava_plugin_up", store); !ok || v != 1 {
		t.Errorf("vltava_plugin_up{local} = %v, %v; plugins seen: %v", v, ok, labelsOf(fams, "vltava_plugin_up"))
	}
	if v, ok := value(fams, "vltava_plugin_calls_total", store); !ok || v < 1 {
		t.Errorf("vltava_plugin_calls_total{local} = %v, %v", v, ok)
	}
	if v, ok := value(fams, "vltava_plugin_call_duration_seconds", store); !ok || v < 1 {
		t.Errorf("vltava_plugin_call_duration_seconds{local} count = %v, %v", v, ok)
	}
	if v, ok := value(fams, "vltava_process_open_fds", map[string]string{"process": "plugin/metastore/local"}); !ok || v < 1 {
		t.Errorf("plugin process fds = %v, %v; processes seen: %v", v, ok, labelsOf(fams, "vltava_process_open_fds"))
	}

	part := map[string]string{"topic": "metered", "partition": "0"}
	if v, ok := value(fams, "vltava_log_end_offset", part); !ok || v != 20 {
		t.Errorf("vltava_log_end_offset{metered-0} = %v, %v; want 20", v, ok)
	}
	if v, ok := value(fams, "vltava_partition_high_watermark", part); !ok || v != 20 {
		t.Errorf("vltava_partition_high_watermark{metered-0} = %v, %v; want 20", v, ok)
	}
	if v, ok := value(fams, "vltava_log_size_bytes", part); !ok || v <= 0 {
		t.Errorf("vltava_log_size_bytes{metered-0} = %v, %v", v, ok)
	}
	if v, ok := value(fams, "vltava_request_duration_seconds", map[string]string{"api": "Produce"}); !ok || v < 20 {
		t.Errorf("Produce requests observed = %v, %v; want >= 20", v, ok)
	}
	if v, ok := value(fams, "vltava_request_queue_seconds", map[string]string{"api": "Produce"}); !ok || v < 20 {
		t.Errorf("Produce requests' queue times observed = %v, %v; want >= 20", v, ok)
	}
	if v, ok := value(fams, "vltava_topic_records_in_total", map[string]string{"topic": "metered"}); !ok || v != 20 {
		t.Errorf("vltava_topic_records_in_total{metered} = %v, %v; want 20", v, ok)
	}
	if v, ok := value(fams, "vltava_topic_bytes_in_total", map[string]string{"topic": "metered"}); !ok || v < float64(20*len("record-0")) {
		t.Errorf("vltava_topic_bytes_in_total{metered} = %v, %v", v, ok)
	}
	if v, ok := value(fams, "vltava_consumer_group_lag", map[string]string{"group": "lagging", "topic": "metered", "partition": "0"}); !ok || v != 15 {
		t.Errorf("vltava_consumer_group_lag{lagging, metered-0} = %v, %v; want 15", v, ok)
	}
	if v, ok := value(fams, "vltava_quota_rate", map[string]string{"kind": "producer_byte_rate", "client_id": "metered-app"}); !ok || v <= 0 {
		t.Errorf("vltava_quota_rate{metered-app} = %v, %v; series: %v", v, ok, labelsOf(fams, "vltava_quota_rate"))
	}
	if v, ok := value(fams, "vltava_metadata_store_session_up", nil); !ok || v != 1 {
		t.Errorf("vltava_metadata_store_session_up = %v, %v", v, ok)
	}
	if v, ok := value(fams, "vltava_broker_fenced", nil); !ok || v != 0 {
		t.Errorf("vltava_broker_fenced = %v, %v", v, ok)
	}
	if _, ok := value(fams, "vltava_leader_elections_total", map[string]string{"kind": "unclean"}); !ok {
		t.Error("no vltava_leader_elections_total{kind=unclean} series")
	}
	if v, ok := value(fams, "vltava_controller_active", nil); !ok || v != 1 {
		t.Errorf("vltava_controller_active = %v, %v; a single broker is its own controller", v, ok)
	}
	if v, ok := value(fams, "vltava_partitions_under_replicated", nil); !ok || v != 0 {
		t.Errorf("vltava_partitions_under_replicated = %v, %v", v, ok)
	}

	checkOpsFilesReferToRealMetrics(t, fams)
}

func labelsOf(fams map[string]*dto.MetricFamily, name string) []string {
	var out []string
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			out = append(out, fmt.Sprint(m.GetLabel()))
		}
	}
	return out
}

// checkOpsFilesReferToRealMetrics checks that every vltava_* name the
// alert rules and the dashboard use is a family the broker exports (a
// histogram's _bucket/_count/_sum suffixes allowed).
func checkOpsFilesReferToRealMetrics(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	re := regexp.MustCompile(`vltava_[a-z_]+`)
	for _, file := range []string{"ops/alerts.yml", "ops/grafana-dashboard.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, n := range re.FindAllString(string(b), -1) {
			names[n] = true
		}
		if len(names) == 0 {
			t.Errorf("%s names no vltava metric", file)
		}
		var missing []string
		for n := range names {
			base := n
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				if s, ok := strings.CutSuffix(n, suf); ok && fams[s] != nil && fams[s].GetType() == dto.MetricType_HISTOGRAM {
					base = s
				}
			}
			if fams[base] == nil {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s refers to metrics the broker does not export: %v", file, missing)
		}
	}
}
