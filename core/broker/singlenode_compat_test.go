package broker

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/config"
)

// testdata/singlenode-v0 is a data directory written by the single-node
// code path before a single node became a cluster of one (commit
// 4254878): topic "old" (2 partitions, retention.ms=86400000, 5 records
// each: keys a..j, values 0..9, record i in partition i%2), and group
// "old-group" with offset 5 committed on both partitions, in a
// one-partition __consumer_offsets. Its /topics/old record has no
// replica assignment and there are no /partitions keys.

// copyDir copies the fixture so the test may write to it.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpensSingleNodeDataDir: a data directory written by the old
// single-node code opens with the cluster-of-one code: its records,
// committed offsets and configs are served, new writes are taken, and it
// opens again after a restart.
func TestOpensSingleNodeDataDir(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", "singlenode-v0"), dir)
	cfg := config.DefaultBroker()
	cfg.Listeners = "127.0.0.1:0"
	cfg.LogDirs = dir
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	check := func(b *Broker, wantRecords int) {
		t.Helper()
		cl := testClient(t, b)
		adm := kadm.NewClient(cl)
		md, err := adm.Metadata(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range md.Topics["old"].Partitions {
			if p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) {
				t.Errorf("old-%d: leader %d replicas %v, want 1 [1]", p.Partition, p.Leader, p.Replicas)
			}
		}
		offs, err := adm.FetchOffsets(ctx, "old-group")
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if o, ok := offs.Lookup("old", p); !ok || o.At != 5 {
				t.Errorf("old-group committed offset on old-%d: %+v (%v), want 5", p, o, ok)
			}
		}
		rc, err := adm.DescribeTopicConfigs(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := rc.On("old", nil); err != nil {
			t.Fatal(err)
		} else if c, ok := findConfig(v.Configs, "retention.ms"); !ok || c != "86400000" {
			t.Errorf("old retention.ms %q, want 86400000", c)
		}
		cons := testClient(t, b, kgo.ConsumeTopics("old"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		seen := map[string]string{}
		for len(seen) < wantRecords && ctx.Err() == nil {
			cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Key)] = string(r.Value) })
		}
		for i := 0; i < 10; i++ {
			if got := seen[string(rune('a'+i))]; got != string(rune('0'+i)) {
				t.Errorf("record %c: value %q, want %q", 'a'+i, got, string(rune('0'+i)))
			}
		}
		if len(seen) != wantRecords {
			t.Errorf("%d records, want %d", len(seen), wantRecords)
		}
	}

	b, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	check(b, 10)
	if err := testClient(t, b).ProduceSync(ctx, &kgo.Record{Topic: "old", Key: []byte("new"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = startBroker(t, cfg)
	check(b, 11)
}

func findConfig(cs []kadm.Config, name string) (string, bool) {
	for _, c := range cs {
		if c.Key == name && c.Value != nil {
			return *c.Value, true
		}
	}
	return "", false
}
