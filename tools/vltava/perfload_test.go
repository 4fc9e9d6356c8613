package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPerfLoad runs `perf load` with two producers and two consumers
// against a kfake cluster, creating the topic, and reads this process's
// own CPU as the "broker" (kfake runs in it).
func TestPerfLoad(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	out := cli(t, addr, "", "perf", "load", "load", "--partitions", "4", "--producers", "2", "--consumers", "2",
		"--duration", "500ms", "--record-size", "100", "--acks", "1", "--broker-pid", fmt.Sprintf("%d,%d", os.Getpid(), os.Getppid()), "--json")
	var got loadReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("perf load --json printed %q: %v", out, err)
	}
	if got.Producers != 2 || got.Consumers != 2 || got.Partitions != 4 || got.ProduceErrors != 0 {
		t.Errorf("perf load = %+v, want 2 producers, 2 consumers, 4 partitions, no errors", got)
	}
	if got.Produce.Records == 0 || got.Consume == nil || got.Consume.Records != got.Produce.Records ||
		got.Produce.Bytes != 100*got.Produce.Records {
		t.Errorf("perf load produced %+v, consumed %+v: want every produced record consumed", got.Produce, got.Consume)
	}
	if got.BrokerCPUSecs == nil || *got.BrokerCPUSecs <= 0 || got.CPUSecsPerGiB == nil {
		t.Errorf("perf load broker cpu = %v, per GiB %v: want the process's CPU time", got.BrokerCPUSecs, got.CPUSecsPerGiB)
	}

	// Spread over topics: 7 partitions over 3 topics (3+2+2), each
	// written to and read.
	out = cli(t, addr, "", "perf", "load", "spread", "--topics", "3", "--partitions", "7", "--producers", "2", "--consumers", "2",
		"--duration", "500ms", "--record-size", "100", "--acks", "1", "--json")
	got = loadReport{}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("perf load --topics 3 --json printed %q: %v", out, err)
	}
	if got.Topics != 3 || got.Partitions != 7 || got.ProduceErrors != 0 || got.Produce.Records == 0 ||
		got.Consume == nil || got.Consume.Records != got.Produce.Records {
		t.Errorf("perf load --topics 3 = %+v, want 3 topics, 7 partitions, every produced record consumed", got)
	}
	for i, want := range []int{3, 2, 2} {
		if n := kfakePartitions(t, addr, fmt.Sprintf("spread-%d", i)); n != want {
			t.Errorf("spread-%d has %d partitions, want %d", i, n, want)
		}
	}
	if _, _, err := cliErr(t, addr, "", "perf", "load", "few", "--topics", "3", "--partitions", "2"); err == nil || !strings.Contains(err.Error(), "--topics") {
		t.Errorf("perf load --topics 3 --partitions 2: err = %v", err)
	}

	out = cli(t, addr, "", "perf", "load", "load", "--producers", "1", "--consumers", "0", "--duration", "200ms", "--acks", "1")
	if !strings.Contains(out, "aggregate: ") || strings.Contains(out, "broker cpu") {
		t.Errorf("perf load without a broker CPU source printed %q", out)
	}
	if _, _, err := cliErr(t, addr, "", "perf", "load", "load", "--broker-pid", "1,x"); err == nil || !strings.Contains(err.Error(), "--broker-pid") {
		t.Errorf("perf load --broker-pid 1,x: err = %v", err)
	}
	if _, _, err := cliErr(t, addr, "", "perf", "load", "nosuch", "--duration", "200ms"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("perf load of a missing topic: err = %v", err)
	}
}

func TestMetricsCPUSeconds(t *testing.T) {
	body := "# HELP x\nvltava_process_cpu_seconds_total{process=\"plugin-x\"} 1.5\nvltava_process_cpu_seconds_total{process=\"broker\"} 12.25\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	defer srv.Close()
	if v, err := metricsCPUSeconds(srv.URL); err != nil || v != 12.25 {
		t.Errorf("metricsCPUSeconds = %v, %v; want 12.25", v, err)
	}
	body = "other 1\n"
	if _, err := metricsCPUSeconds(srv.URL); err == nil {
		t.Error("metricsCPUSeconds without the series: no error")
	}
	if v, err := procCPUSeconds(os.Getpid()); err != nil || v < 0 {
		t.Errorf("procCPUSeconds(self) = %v, %v", v, err)
	}
	if _, err := procCPUSeconds(1 << 30); err == nil {
		t.Error("procCPUSeconds of a missing pid: no error")
	}
}

// kfakePartitions is the partition count of topic (0 if unknown).
func kfakePartitions(t *testing.T, addr, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(md.Topics[topic].Partitions)
}
