package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
)

// TestMetadataMoveBetweenStores moves one broker's metadata local → raft
// → zookeeper → etcd with vltava metadata export and import while the
// broker is stopped; its data directory stays. After every move the
// broker serves the same topics, topic configs, records and committed
// offsets.
func TestMetadataMoveBetweenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts vltavad, ZooKeeper and etcd; skipped with -short")
	}
	zk := zktest.Start(t, 1)
	et := etcdtest.Start(t, 1)
	bin := daemontest.Build(t)
	dataDir := t.TempDir()
	quorum := daemontest.FreePort(t)
	base := "node.id: 1\ndefault.replication.factor: 1\noffsets.topic.replication.factor: 1\noffsets.topic.num.partitions: 2\ngroup.initial.rebalance.delay.ms: 0\n"
	phases := []struct {
		store string
		yaml  string   // broker config beyond base
		set   []string // the same store for vltava metadata
	}{
		{"local", "", []string{"path=" + filepath.Join(dataDir, "meta", "local.db")}},
		{"raft", fmt.Sprintf("controller.quorum.voters: \"1@%s\"\ncontroller.quorum.listen: %q\n", quorum, quorum),
			[]string{"node.id=1", "data.dir=" + filepath.Join(dataDir, "meta", "raft"), "voters=1@" + quorum, "quorum.listen=" + quorum}},
		{"zookeeper", fmt.Sprintf("metadata.store: zookeeper\nzookeeper.connect: %q\nzookeeper.session.timeout.ms: 4000\n", zk.Connect()+"/moved"),
			[]string{"connect=" + zk.Connect() + "/moved"}},
		{"etcd", fmt.Sprintf("metadata.store: etcd\nmetadata.store.config:\n  endpoints: %q\n  prefix: /moved\n", et.Endpoints()),
			[]string{"endpoints=" + et.Endpoints(), "prefix=/moved"}},
	}
	const topic, group, records = "orders", "billing", 30
	for i, ph := range phases {
		if i > 0 {
			prev := phases[i-1]
			export := metaCLI(t, "", append([]string{"metadata", "export", "--store", prev.store}, setFlags(prev.set)...)...)
			if !strings.Contains(export, `"/topics/`+topic) && !strings.Contains(export, topic) {
				t.Fatalf("export of the %s store does not mention topic %s:\n%s", prev.store, topic, export)
			}
			metaCLI(t, export, append([]string{"metadata", "import", "--store", ph.store}, setFlags(ph.set)...)...)
		}
		cfg := filepath.Join(t.TempDir(), "broker.yaml")
		if err := os.WriteFile(cfg, []byte(base+ph.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		p := daemontest.Start(t, bin, "--data-dir", dataDir, "--config", cfg)
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		if i == 0 {
			seedCluster(t, cl, adm, topic, group, records)
		}
		checkServed(t, ph.store, cl, adm, topic, group, records)
		cl.Close()
		if err := p.Stop(); err != nil {
			t.Fatalf("stop the broker on %s: %v\n%s", ph.store, err, p.Log())
		}
	}
}

func setFlags(set []string) []string {
	var out []string
	for _, s := range set {
		out = append(out, "--set", s)
	}
	return out
}

// metaCLI runs a vltava metadata command in process.
func metaCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := cliErr(t, "127.0.0.1:1", stdin, args...)
	if err != nil {
		t.Fatalf("vltava %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	t.Logf("vltava %s: %s", strings.Join(args[:4], " "), strings.TrimSpace(errOut))
	return out
}

func seedCluster(t *testing.T, cl *kgo.Client, adm *kadm.Client, topic, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("86400123")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: fmt.Appendf(nil, "v%02d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	offs := kadm.Offsets{}
	for p := range int32(3) {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(p + 2), LeaderEpoch: -1})
	}
	var cerr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var r kadm.OffsetResponses
		if r, cerr = adm.CommitOffsets(ctx, group, offs); cerr == nil {
			if cerr = r.Error(); cerr == nil {
				return
			}
		}
	}
	t.Fatalf("commit offsets: %v", cerr)
}

// checkServed asserts the broker serves the topic (3 partitions, its
// retention.ms), every record, and the group's committed offsets.
func checkServed(t *testing.T, store string, cl *kgo.Client, adm *kadm.Client, topic, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last error
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		last = func() error {
			td, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			d, ok := td[topic]
			if !ok || d.Err != nil || len(d.Partitions) != 3 {
				return fmt.Errorf("topic %s: %+v", topic, d)
			}
			for _, p := range d.Partitions {
				if p.Leader != 1 {
					return fmt.Errorf("partition %d has leader %d", p.Partition, p.Leader)
				}
			}
			rc, err := adm.DescribeTopicConfigs(ctx, topic)
			if err != nil {
				return err
			}
			c, err := rc.On(topic, nil)
			if err != nil {
				return err
			}
			found := false
			for _, kv := range c.Configs {
				if kv.Key == "retention.ms" && kv.MaybeValue() == "86400123" {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("retention.ms of %s is not 86400123", topic)
			}
			fo, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return err
			}
			for p := range int32(3) {
				o, ok := fo.Lookup(topic, p)
				if !ok || o.Err != nil || o.At != int64(p+2) {
					return fmt.Errorf("committed offset of %s/%d: %+v", topic, p, o)
				}
			}
			return nil
		}()
		if last == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("on the %s store: %v", store, last)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	for len(got) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for i := range n {
		if !got[fmt.Sprintf("v%02d", i)] {
			t.Fatalf("on the %s store: record v%02d not read back (%d of %d)", store, i, len(got), n)
		}
	}
	t.Logf("on the %s store: topic, config, %d records and committed offsets served", store, n)
}

// TestMetadataImportChecks: bad invocations and bad exports fail with a
// message, an import does not overwrite a store that has keys unless
// --force, and an export/import round trip through local stores keeps
// every key and value.
func TestMetadataImportChecks(t *testing.T) {
	dir := t.TempDir()
	src := []string{"--store", "local", "--set", "path=" + filepath.Join(dir, "a.db")}
	dst := []string{"--store", "local", "--set", "path=" + filepath.Join(dir, "b.db")}
	run := func(stdin string, args ...string) (string, string, error) {
		return cliErr(t, "127.0.0.1:1", stdin, args...)
	}
	if _, errOut, err := run("", "metadata", "export"); err == nil {
		t.Fatal("export without --store succeeded")
	} else if !strings.Contains(err.Error()+errOut, "--store is required") {
		t.Fatalf("export without --store: %v %s", err, errOut)
	}
	// Seed the source through an import of a hand-written export.
	seed := `{"format":"vltava-metadata","version":1,"store":"test","revision":9,"keys":2}
{"key":"/topics/a","value":"eyJ4IjoxfQ=="}
{"key":"/producer-ids","value":""}
`
	if _, errOut, err := run(seed, append([]string{"metadata", "import"}, src...)...); err != nil {
		t.Fatalf("import: %v %s", err, errOut)
	}
	if _, _, err := run(seed, append([]string{"metadata", "import"}, src...)...); err == nil || !strings.Contains(err.Error(), "already holds 2 keys") {
		t.Fatalf("import into a store with keys: %v, want a refusal", err)
	}
	if _, errOut, err := run(seed, append([]string{"metadata", "import", "--force"}, src...)...); err != nil {
		t.Fatalf("import --force: %v %s", err, errOut)
	}
	truncated := strings.Join(strings.Split(seed, "\n")[:2], "\n") + "\n"
	if _, _, err := run(truncated, append([]string{"metadata", "import"}, dst...)...); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("import of a truncated export: %v, want an error saying so", err)
	}
	if _, _, err := run("{\"format\":\"other\"}\n", append([]string{"metadata", "import"}, dst...)...); err == nil {
		t.Fatal("import of something else succeeded")
	}
	out, errOut, err := run("", append([]string{"metadata", "export"}, src...)...)
	if err != nil {
		t.Fatalf("export: %v %s", err, errOut)
	}
	if _, errOut, err := run(out, append([]string{"metadata", "import"}, dst...)...); err != nil {
		t.Fatalf("import of the export: %v %s", err, errOut)
	}
	again, _, err := run("", append([]string{"metadata", "export"}, dst...)...)
	if err != nil {
		t.Fatal(err)
	}
	body := func(s string) string { _, rest, _ := strings.Cut(s, "\n"); return rest }
	if body(again) != body(out) || !strings.Contains(out, `"key":"/topics/a","value":"eyJ4IjoxfQ=="`) {
		t.Fatalf("round trip changed the keys:\n%s\nvs\n%s", out, again)
	}
}
