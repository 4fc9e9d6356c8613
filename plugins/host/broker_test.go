package host

import (
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// TestNoStoreCallPerProduceOrFetch runs a broker whose metadata store is
// out of process and counts the calls made to it: once the topic exists,
// produce and fetch requests make none (metadata is off the hot path).
func TestNoStoreCallPerProduceOrFetch(t *testing.T) {
	dir := t.TempDir()
	p := load(t, testHost(t, nil), spec(serve.KindMetadataStore, "local", map[string]any{"path": filepath.Join(dir, "meta", "local.db")}))
	cfg := config.DefaultBroker()
	cfg.Listeners, cfg.LogDirs = "127.0.0.1:0", dir
	b, err := broker.New(cfg, broker.Options{Store: p.MetadataStore(), Assignors: nil})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("hot"), kgo.ConsumeTopics("hot"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := t.Context()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "hot"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("first")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := p.Calls()
	const requests = 200
	for i := range requests {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(string(rune('a'+i%26)))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < requests+1 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if d := p.Calls() - before; d != 0 {
		t.Errorf("%d produce requests and their fetches made %d metadata store calls, want 0", requests, d)
	}
	if before == 0 {
		t.Errorf("the broker made no store call at all: is the counter counting?")
	}
}
