package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/conformance/target"
)

func TestConformanceBootstrapPrecedence(t *testing.T) {
	cases := []struct {
		flagSet         bool
		flagVal, envVal string
		want, note      string
	}{
		{true, "a:1", "b:2", "a:1", "from -b; " + target.EnvBootstrap + "=b:2 ignored"},
		{true, "a:1", "", "a:1", "from -b"},
		{false, "127.0.0.1:9092", "b:2", "b:2", "from " + target.EnvBootstrap},
		{false, "127.0.0.1:9092", "", "", ""},
	}
	for _, c := range cases {
		got, note := conformanceBootstrap(c.flagSet, c.flagVal, c.envVal)
		if got != c.want || !strings.Contains(note, c.note) {
			t.Errorf("conformanceBootstrap(%v, %q, %q) = %q, %q; want %q, note with %q", c.flagSet, c.flagVal, c.envVal, got, note, c.want, c.note)
		}
	}
}

// TestConformanceExternalNeedsBootstrap: without -b or the environment
// variable, --target external refuses to run (no silent 127.0.0.1:9092).
func TestConformanceExternalNeedsBootstrap(t *testing.T) {
	t.Setenv(target.EnvBootstrap, "")
	t.Setenv("VLTAVA_BOOTSTRAP", "")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"conformance", "--target", "external"}, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "explicit bootstrap") {
		t.Fatalf("err = %v, want an explicit-bootstrap error", err)
	}
}

// TestConformanceUnknownCapability: a misspelt VLTAVA_CONFORMANCE_CAPS
// name is an error naming it.
func TestConformanceUnknownCapability(t *testing.T) {
	t.Setenv(target.EnvCaps, "multibroker,replicaton")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"-b", "127.0.0.1:1", "conformance", "--target", "external"}, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "replicaton") {
		t.Fatalf("err = %v, want an unknown-capability error", err)
	}
}

func TestConformanceHelpDocumentsHooks(t *testing.T) {
	var out, errb bytes.Buffer
	_ = run(context.Background(), []string{"conformance", "-h"}, nil, &out, &errb)
	for _, want := range []string{target.EnvKill, target.EnvStop, target.EnvCont, target.EnvRestart, target.EnvCaps,
		target.EnvBootstrap, "--keep", "-format", "-junit", "kill9", "transactions", "sasl"} {
		if !strings.Contains(out.String()+errb.String(), want) {
			t.Errorf("conformance -h does not mention %q", want)
		}
	}
}

// TestConformanceReports runs two scenarios on kfake and checks the
// three report formats: the Markdown header describes the target, the
// JSON parses with ApiVersions and results, the JUnit XML has a test
// case per scenario.
func TestConformanceReports(t *testing.T) {
	dir := t.TempDir()
	md, js, junit := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	var out, errb bytes.Buffer
	args := []string{"conformance", "--target", "kfake", "--run", "^(format_null_key_value|groups_static_bounce)$", "--report", md, "--junit", junit}
	if err := run(context.Background(), args, nil, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	b, _ := os.ReadFile(md)
	for _, want := range []string{"# Conformance report: kfake", "- software: github.com/twmb/franz-go/pkg/kfake", "- ApiVersions (", "Produce(0) v",
		"- capabilities: ", "| format_null_key_value | pass |", "| groups_static_bounce | known |", "1 passed, 0 failed, 0 skipped, 1 known findings"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Markdown report lacks %q:\n%s", want, b)
		}
	}
	x, _ := os.ReadFile(junit)
	if !strings.Contains(string(x), `<testcase name="format_null_key_value"`) || !strings.Contains(string(x), `<skipped message="FINDINGS.md K6`) {
		t.Errorf("JUnit report:\n%s", x)
	}
	args = []string{"conformance", "--target", "kfake", "--run", "^format_null_key_value$", "--format", "json", "--report", js}
	if err := run(context.Background(), args, nil, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var rep struct {
		Target struct {
			APIs []struct{ Name string } `json:"apis"`
		} `json:"target"`
		Results []struct{ Scenario, Status string } `json:"results"`
	}
	jb, _ := os.ReadFile(js)
	if err := json.Unmarshal(jb, &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, jb)
	}
	if len(rep.Target.APIs) < 10 || len(rep.Results) != 1 || rep.Results[0].Status != "pass" {
		t.Fatalf("JSON report: %+v", rep)
	}
}

// TestConformanceExternalCleansUp runs scenarios against a running
// cluster as the external target: the topics it creates carry the run
// prefix and are deleted at the end (kept with --keep), and a scenario
// whose broker settings the cluster lacks is skipped with the setting.
func TestConformanceExternalCleansUp(t *testing.T) {
	t.Setenv(target.EnvBootstrap, "")
	t.Setenv(target.EnvCaps, "")
	for _, keep := range []bool{false, true} {
		addr := newCluster(t)
		dir := t.TempDir()
		report := filepath.Join(dir, "r.md")
		args := []string{"-b", addr, "conformance", "--target", "external", "--run", "^(format_null_key_value|offsets_retention_ms)$", "--report", report}
		if keep {
			args = append(args, "--keep")
		}
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, nil, &out, &errb); err != nil {
			t.Fatalf("%v\n%s", err, errb.String())
		}
		b, _ := os.ReadFile(report)
		if !strings.Contains(string(b), "| format_null_key_value | pass |") ||
			!strings.Contains(string(b), "precondition: needs broker config log.retention.check.interval.ms<=200") {
			t.Fatalf("report:\n%s", b)
		}
		if !strings.Contains(errb.String(), "bootstrap: "+addr+" (from -b)") {
			t.Errorf("stderr does not say where the bootstrap came from:\n%s", errb.String())
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		topics, err := kadm.NewClient(cl).ListTopics(ctx)
		cancel()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, "vc-") && strings.HasSuffix(name, "-nv") {
				left = append(left, name)
			}
		}
		if keep != (len(left) == 1) {
			t.Errorf("keep=%v: prefixed topics left on the cluster: %v (all: %v)", keep, left, topics.Names())
		}
	}
}
