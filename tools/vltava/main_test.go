package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vltava/vltava/daemon/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

// newCluster starts a one-broker cluster with the seed topics (one
// partition each) and returns its bootstrap address. The cluster is
// franz-go's kfake, or a vltavad process when VLTAVA_CLI_TARGET=vltavad.
func newCluster(t *testing.T, seedTopics ...string) string {
	t.Helper()
	if os.Getenv("VLTAVA_CLI_TARGET") == "vltavad" {
		return startVltavad(t, seedTopics...)
	}
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(seedTopics) > 0 {
		opts = append(opts, kfake.SeedTopics(1, seedTopics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func startVltavad(t *testing.T, seedTopics ...string) string {
	t.Helper()
	p := daemontest.Start(t, daemontest.Build(t))
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(seedTopics) > 0 {
		resps, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, seedTopics...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			t.Fatalf("create seed topics: %v", err)
		}
	}
	return p.Addr()
}

// cli runs one vltava command line against addr and returns its stdout.
// It fails the test if the command fails.
func cli(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := cliErr(t, addr, stdin, args...)
	if err != nil {
		t.Fatalf("vltava %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func cliErr(t *testing.T, addr, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	err = run(ctx, append([]string{"-b", addr}, args...), strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), err
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// firstColumn is the first word of each line of a table, without the header.
func firstColumn(s string) []string {
	var out []string
	for _, l := range lines(s)[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

func TestTopicLifecycle(t *testing.T) {
	addr := newCluster(t)
	out := cli(t, addr, "", "topic", "create", "demo", "-p", "3", "-c", "retention.ms=1000")
	if !strings.Contains(out, "created topic demo (partitions 3") {
		t.Errorf("create printed %q", out)
	}
	cli(t, addr, "", "topic", "create", "other")
	if got := firstColumn(cli(t, addr, "", "topic", "list")); !slices.Equal(got, []string{"demo", "other"}) {
		t.Errorf("list = %q", got)
	}

	desc := cli(t, addr, "", "topic", "describe", "demo")
	if !strings.Contains(desc, "partitions 3") || !strings.Contains(desc, "retention.ms=1000") {
		t.Errorf("describe:\n%s", desc)
	}
	rows := 0
	for _, l := range lines(desc) {
		if f := strings.Fields(l); len(f) == 6 && f[0] != "PARTITION" {
			rows++
			if f[4] != "0" || f[5] != "0" {
				t.Errorf("empty partition row %q: want offsets 0 0", l)
			}
		}
	}
	if rows != 3 {
		t.Errorf("describe shows %d partition rows, want 3:\n%s", rows, desc)
	}

	cli(t, addr, "", "topic", "alter-config", "demo", "-c", "retention.bytes=100", "-d", "retention.ms")
	desc = cli(t, addr, "", "topic", "describe", "demo")
	if !strings.Contains(desc, "retention.bytes=100") || strings.Contains(desc, "retention.ms=") {
		t.Errorf("describe after alter:\n%s", desc)
	}

	cli(t, addr, "", "topic", "delete", "demo")
	if got := firstColumn(cli(t, addr, "", "topic", "list")); !slices.Equal(got, []string{"other"}) {
		t.Errorf("list after delete = %q", got)
	}
	if _, _, err := cliErr(t, addr, "", "topic", "describe", "demo"); err == nil {
		t.Error("describing a deleted topic succeeded")
	}
}

func TestBootstrapFromEnvironment(t *testing.T) {
	addr := newCluster(t, "envtopic")
	t.Setenv("VLTAVA_BOOTSTRAP", addr)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, []string{"topic", "list"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := firstColumn(out.String()); !slices.Equal(got, []string{"envtopic"}) {
		t.Errorf("topic list via $VLTAVA_BOOTSTRAP = %q", got)
	}
}

func TestProduceLinesConsumeThemBack(t *testing.T) {
	addr := newCluster(t, "t")
	out := cli(t, addr, "a:1\nb:2\n:plain\n", "produce", "t", "-k", ":", "-H", "src=test", "--compression", "lz4")
	if !strings.HasPrefix(out, "produced 3 records (9 bytes) to t") {
		t.Errorf("produce printed %q", out)
	}
	got := lines(cli(t, addr, "", "consume", "t", "-n", "3"))
	want := []string{"t/0@0: a=1", "t/0@1: b=2", "t/0@2: =plain"}
	if !slices.Equal(got, want) {
		t.Errorf("consume = %q, want %q", got, want)
	}
	got = lines(cli(t, addr, "", "consume", "t", "--until-end", "--format", `%o\t%v [%h] 100%%`))
	want = []string{"0\t1 [src=test] 100%", "1\t2 [src=test] 100%", "2\tplain [src=test] 100%"}
	if !slices.Equal(got, want) {
		t.Errorf("consume --format = %q, want %q", got, want)
	}
}

// produceAt writes values with explicit timestamps (ms) straight through kgo.
func produceAt(t *testing.T, addr, topic string, msValues map[int64]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys := make([]int64, 0, len(msValues))
	for ms := range msValues {
		keys = append(keys, ms)
	}
	slices.Sort(keys)
	for _, ms := range keys {
		r := &kgo.Record{Topic: topic, Value: []byte(msValues[ms]), Timestamp: time.UnixMilli(ms)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConsumeFromTimestampAndOffset(t *testing.T) {
	addr := newCluster(t, "ts")
	produceAt(t, addr, "ts", map[int64]string{1000: "one", 2000: "two", 3000: "three"})

	got := lines(cli(t, addr, "", "consume", "ts", "--from", "@2000", "-n", "2", "--format", "%T %v"))
	if want := []string{"2000 two", "3000 three"}; !slices.Equal(got, want) {
		t.Errorf("--from @2000 = %q, want %q", got, want)
	}
	got = lines(cli(t, addr, "", "consume", "ts", "--from", "@2500", "--until-end", "--format", "%o %v"))
	if want := []string{"2 three"}; !slices.Equal(got, want) {
		t.Errorf("--from @2500 = %q, want %q", got, want)
	}
	got = lines(cli(t, addr, "", "consume", "ts", "--from", "1", "--until-end", "--format", "%v"))
	if want := []string{"two", "three"}; !slices.Equal(got, want) {
		t.Errorf("--from 1 = %q, want %q", got, want)
	}
	if out := cli(t, addr, "", "consume", "ts", "--from", "end", "--until-end"); out != "" {
		t.Errorf("--from end --until-end printed %q, want nothing", out)
	}
}

func TestPerfProduceThenConsume(t *testing.T) {
	addr := newCluster(t, "perf")
	var prod struct {
		Kind    string
		Records int64
		Bytes   int64
		Latency *struct {
			P99Ms float64 `json:"p99_ms"`
		}
	}
	out := cli(t, addr, "", "perf", "produce", "perf", "--records", "200", "--record-size", "64", "--acks", "1", "--json")
	if err := json.Unmarshal([]byte(out), &prod); err != nil {
		t.Fatalf("perf produce --json printed %q: %v", out, err)
	}
	if prod.Kind != "produce" || prod.Records != 200 || prod.Bytes != 200*64 || prod.Latency == nil {
		t.Errorf("perf produce figures = %+v", prod)
	}

	var cons struct {
		Records int64
		Bytes   int64
	}
	out = cli(t, addr, "", "perf", "consume", "perf", "--records", "200", "--json")
	if err := json.Unmarshal([]byte(out), &cons); err != nil {
		t.Fatalf("perf consume --json printed %q: %v", out, err)
	}
	if cons.Records != 200 || cons.Bytes != 200*64 {
		t.Errorf("perf consume figures = %+v", cons)
	}

	out = cli(t, addr, "", "perf", "consume", "perf", "--records", "150")
	if !strings.Contains(out, "consume total: 150 records") {
		t.Errorf("perf consume printed %q", out)
	}
	// Asking for more records than exist gives up after the idle timeout.
	_, _, err := cliErr(t, addr, "", "perf", "consume", "perf", "--records", "201", "--idle", "300ms")
	if err == nil || !strings.Contains(err.Error(), "consumed 200 of 201") {
		t.Errorf("perf consume past the end: err = %v", err)
	}
}

func TestProduceGenerated(t *testing.T) {
	addr := newCluster(t, "gen")
	out := cli(t, addr, "", "produce", "gen", "-n", "5", "-s", "8", "--partition", "0")
	if !strings.HasPrefix(out, "produced 5 records (40 bytes)") {
		t.Errorf("produce -n printed %q", out)
	}
	got := lines(cli(t, addr, "", "consume", "gen", "--until-end", "--partition", "0", "--format", "%v"))
	if len(got) != 5 || got[0] != "0 cdefgh" || got[4] != "4 cdefgh" {
		t.Errorf("generated values = %q", got)
	}
}

func TestUsageErrors(t *testing.T) {
	// Each is refused before any connection (the address has no broker).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		{[]string{"topic", "create"}, "want NAME"},
		{[]string{"topic", "create", "a", "b"}, `want NAME, got ["a" "b"]`},
		{[]string{"topic", "create", "a", "-c", "novalue"}, `"novalue" is not key=value`},
		{[]string{"topic", "alter-config", "a"}, "usage error"},
		{[]string{"produce", "t", "--acks", "2"}, `--acks "2"`},
		{[]string{"produce", "t", "--compression", "brotli"}, `--compression "brotli"`},
		{[]string{"consume", "t", "--format", "%q"}, "unknown placeholder %q"},
		{[]string{"consume", "t", "--from", "@x"}, `--from "@x"`},
		{[]string{"consume", "t", "--from", "-x"}, `--from "-x"`},
		{[]string{"consume", "t", "--reset", "sometimes"}, `--reset "sometimes"`},
		{[]string{"perf", "produce", "t", "--records", "0"}, "--records"},
	} {
		_, _, err := cliErr(t, "127.0.0.1:1", "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("vltava %q: err = %v, want it to mention %s", tc.args, err, tc.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "perf produce") {
		t.Errorf("help: %v %q", err, out.String())
	}
}

func TestParseFormat(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 2, Offset: 7, Key: []byte("k"), Value: []byte("v"),
		Timestamp: time.UnixMilli(42), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b"}}}
	for format, want := range map[string]string{
		defaultFormat: "t/2@7: k=v\n",
		`%h|%T`:       "a=1,b=|42\n",
		`\\%%\n`:      "\\%\n\n",
		`trailing\`:   "trailing\\\n",
		`%v%v`:        "vv\n",
	} {
		f, err := parseFormat(format)
		if err != nil {
			t.Fatalf("parseFormat(%q): %v", format, err)
		}
		var b bytes.Buffer
		if err := f.write(&b, r); err != nil || b.String() != want {
			t.Errorf("format %q wrote %q, want %q (%v)", format, b.String(), want, err)
		}
	}
	for _, bad := range []string{"%", "%x", "a%"} {
		if _, err := parseFormat(bad); err == nil {
			t.Errorf("parseFormat(%q) accepted", bad)
		}
	}
}

// TestConsumeStopsWhenTopicDeleted: a running consume ends with "topic
// deleted" when its topic is deleted, instead of waiting for ever.
func TestConsumeStopsWhenTopicDeleted(t *testing.T) {
	addr := newCluster(t, "doomed")
	cli(t, addr, "a\nb\n", "produce", "doomed")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-b", addr, "consume", "doomed"}, strings.NewReader(""), &out, &errOut)
	}()
	// Wait until this consume (not another one) printed what is there,
	// so it is past its start-up check that the topic exists, then
	// delete the topic under it.
	for deadline := time.Now().Add(60 * time.Second); strings.Count(out.String(), "\n") < 2; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("consume ended before the delete: %v; stderr:\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume printed %q within 60s, want both records", out.String())
		}
	}
	cli(t, addr, "", "topic", "delete", "doomed")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "doomed: topic deleted") {
			t.Errorf("consume ended with %v, want doomed: topic deleted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("consume still running 30s after its topic was deleted")
	}
}

// TestPerfConsumeRateExcludesIdleWait: a run that ends by waiting in vain
// for more records ends its figures at the last record.
func TestPerfConsumeRateExcludesIdleWait(t *testing.T) {
	addr := newCluster(t, "short")
	cli(t, addr, "", "perf", "produce", "short", "--records", "100", "--record-size", "10", "--acks", "1")
	out, _, err := cliErr(t, addr, "", "perf", "consume", "short", "--records", "101", "--idle", "3s", "--json")
	if err == nil || !strings.Contains(err.Error(), "consumed 100 of 101") {
		t.Fatalf("err = %v", err)
	}
	var r struct {
		Records int64
		Seconds float64
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	// The run itself waited 3s for a record that never came; the figures
	// must not include that wait.
	if r.Records != 100 || r.Seconds >= 3 {
		t.Errorf("figures %+v: want 100 records over less than the 3s idle wait", r)
	}
}
