package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vltava/vltava/core/config"
)

// loadArgs parses args like vltavad does and returns the broker config.
func loadArgs(t *testing.T, args ...string) (config.Broker, error) {
	t.Helper()
	f := newServeFlags(io.Discard)
	if err := f.parse(args); err != nil {
		return config.Broker{}, err
	}
	return f.load()
}

// effective is want with advertised.listeners filled in from listeners as
// load does when it is unset.
func effective(want config.Broker) config.Broker {
	if first := strings.TrimSpace(strings.Split(want.Listeners, ",")[0]); want.AdvertisedListeners == "" && !strings.HasSuffix(first, ":0") {
		want.AdvertisedListeners = first
	}
	return want
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNoArgumentsGiveDefaults(t *testing.T) {
	got, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(effective(config.DefaultBroker()), got); diff != "" {
		t.Errorf("config differs from defaults (-want +got):\n%s", diff)
	}
	if got.Listeners != "127.0.0.1:9092" || got.LogDirs != "./data" {
		t.Errorf("listeners %q, log.dirs %q", got.Listeners, got.LogDirs)
	}
}

func TestYAMLFile(t *testing.T) {
	p := writeFile(t, "vltava.yaml", `
num.partitions: 3
log.segment.bytes: 1048576
auto.create.topics.enable: false
message.max.bytes: "2000000"   # a string number, as copied from .properties
log:
  retention.ms: 1000           # nested keys join with dots
`)
	got, err := loadArgs(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultBroker()
	want.NumPartitions = 3
	want.LogSegmentBytes = 1048576
	want.AutoCreateTopicsEnable = false
	want.MessageMaxBytes = 2000000
	want.LogRetentionMs = 1000
	if diff := cmp.Diff(effective(want), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPropertiesFile(t *testing.T) {
	p := writeFile(t, "server.properties", `# Kafka style
! also a comment
num.partitions=4
log.retention.ms = 5000
log.dirs: /tmp/vltava-data
listeners PLAINTEXT://127.0.0.1:9093
delete.topic.enable=false
log.cleanup.policy=\
    delete
`)
	got, err := loadArgs(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultBroker()
	want.NumPartitions = 4
	want.LogRetentionMs = 5000
	want.LogDirs = "/tmp/vltava-data"
	want.Listeners = "PLAINTEXT://127.0.0.1:9093"
	want.DeleteTopicEnable = false
	want.LogCleanupPolicy = "delete"
	if diff := cmp.Diff(effective(want), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFlagsOverrideFileOverridesDefaults(t *testing.T) {
	p := writeFile(t, "c.yaml", `
listeners: 127.0.0.1:7000
advertised.listeners: example.test:7000
log.dirs: /from/file
node.id: 5
num.partitions: 2
`)
	got, err := loadArgs(t, "--config", p, "--listen", "127.0.0.1:8000", "--data-dir", "/from/flag", "--node-id", "7")
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultBroker()
	want.Listeners = "127.0.0.1:8000"              // flag beats file
	want.AdvertisedListeners = "example.test:8000" // file beats default; derived from the file's listener, it follows --listen
	want.LogDirs = "/from/flag"
	want.NodeID = 7
	want.NumPartitions = 2
	if diff := cmp.Diff(effective(want), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	got, err = loadArgs(t, "--advertised", "broker.test:9", "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if got.AdvertisedListeners != "broker.test:9" || got.Listeners != "127.0.0.1:7000" {
		t.Errorf("advertised %q listeners %q", got.AdvertisedListeners, got.Listeners)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		file, text string
		want       []string // substrings of the error
	}{
		{"a.yaml", "num.partitions: 2\nnum.partitons: 3\n", []string{`"num.partitons"`}},
		{"a.properties", "zookeeper.conect=localhost:2181\n", []string{`"zookeeper.conect"`}},
		{"a.properties", "log.retension.ms=5\n", []string{`"log.retension.ms" (did you mean "log.retention.ms"?)`}},
		{"a.properties", "log.retention.hours=many\n", []string{"log.retention.hours", "many"}},
		{"a.yaml", "log:\n  segment.byte: 10\n", []string{`"log.segment.byte"`}},
		{"a.yaml", "num.partitions: many\n", []string{"num.partitions", "many"}},
		{"a.properties", "auto.create.topics.enable=maybe\n", []string{"auto.create.topics.enable", "maybe"}},
		{"a.yaml", "node.id: [1, 2]\n", []string{"node.id"}},
		{"a.yaml", "num.partitions: 0\n", []string{"num.partitions", "out of range"}},
		{"a.yaml", "node.id: 4294967297\n", []string{"node.id", "4294967297", "32-bit"}},
		{"a.yaml", "log.segment.bytes: 1.5\n", []string{"log.segment.bytes", "1.5"}},
		{"a.yaml", "log.cleanup.policy: shred\n", []string{"log.cleanup.policy", "shred"}},
		{"a.yaml", "num.partitions: [\n", []string{"a.yaml"}}, // YAML syntax error names the file
	} {
		p := writeFile(t, tc.file, tc.text)
		_, err := loadArgs(t, "--config", p)
		if err == nil {
			t.Errorf("%s %q: accepted", tc.file, tc.text)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %q: error %q does not mention %s", tc.file, tc.text, err, w)
			}
		}
	}
	if _, err := loadArgs(t, "--config", filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing config file accepted")
	}
	if _, err := loadArgs(t, "--listen", "nonsense"); err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Errorf("bad --listen: %v", err)
	}
	if _, err := loadArgs(t, "extra"); err == nil {
		t.Error("stray argument accepted")
	}
}

func TestConfigSubcommandRoundTrips(t *testing.T) {
	// "vltavad config" prints a .properties file that reads back unchanged.
	var out, errOut bytes.Buffer
	if code := run([]string{"config", "--node-id", "9", "--data-dir", "/d"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "node.id=9\n") || !strings.Contains(out.String(), "log.dirs=/d\n") {
		t.Fatalf("config printed:\n%s", out.String())
	}
	p := writeFile(t, "dump.properties", out.String())
	got, err := loadArgs(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultBroker()
	want.NodeID, want.LogDirs = 9, "/d"
	if diff := cmp.Diff(effective(want), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSubcommandDispatch(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Errorf("unknown subcommand exited %d, want 2", code)
	}
	if s := errOut.String(); !strings.Contains(s, `unknown subcommand "frobnicate"`) || !strings.Contains(s, "usage:") {
		t.Errorf("stderr = %q", s)
	}
	out.Reset()
	if code := run([]string{"--help"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "-data-dir DIR") {
		t.Errorf("--help exited %d, printed %q", code, out.String())
	}
	if code := run([]string{"--no-such-flag"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag exited %d, want 2", code)
	}
	if code := run([]string{"--log-level", "loud"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad log level exited %d, want 2", code)
	}
}

// TestREADMEExampleConfig loads testdata/vltava.yaml, the example the
// README shows, so the documented config keeps working.
func TestREADMEExampleConfig(t *testing.T) {
	got, err := loadArgs(t, "--config", filepath.Join("..", "testdata", "vltava.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := config.DefaultBroker()
	want.AdvertisedListeners = "localhost:9092"
	want.NumPartitions = 3
	if diff := cmp.Diff(effective(want), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestREADMESecuredCluster loads the secured cluster's config block of
// the README, so the documented keys keep parsing and validating.
func TestREADMESecuredCluster(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "## A secured cluster")
	_, block, ok2 := strings.Cut(sec, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no yaml block under \"## A secured cluster\"")
	}
	got, err := loadArgs(t, "--config", writeFile(t, "secure.yaml", block))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := got.ParseListeners()
	if err != nil {
		t.Fatal(err)
	}
	ib, err := got.InterBrokerListener()
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || !ls[0].TLS() || !ls[1].TLS() || ib.Name != "INTERNAL" || ib.AdvertisedHost != "broker1.example" ||
		got.ClientAuth() != config.ClientAuthRequired || !got.QuorumTLS() {
		t.Errorf("listeners %+v, inter-broker %+v, client auth %q, quorum TLS %v", ls, ib, got.ClientAuth(), got.QuorumTLS())
	}
}
