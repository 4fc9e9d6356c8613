package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/config"
)

func testAdmin(t *testing.T, b *Broker) *kadm.Client {
	return kadm.NewClient(testClient(t, b))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAPIVersionsMatchesTable checks that ApiVersions advertises exactly the
// handler table and that every advertised version of every API is answered
// rather than closing the connection.
func TestAPIVersionsMatchesTable(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	ctx := ctxT(t)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []api
	for _, k := range resp.ApiKeys {
		got = append(got, api{key: k.ApiKey, min: k.MinVersion, max: k.MaxVersion})
	}
	var want []api
	for _, a := range apis {
		want = append(want, api{key: a.key, min: a.min, max: a.max})
	}
	eq := func(a, b api) bool { return a.key == b.key && a.min == b.min && a.max == b.max }
	if !slices.EqualFunc(got, want, eq) {
		t.Fatalf("ApiVersions advertises %v, table has %v", got, want)
	}
	for _, a := range apis {
		if max := kmsg.RequestForKey(a.key).MaxVersion(); a.max > max {
			t.Errorf("%s: table serves up to v%d, kmsg knows v%d", a.name, a.max, max)
		}
		if a.key == 0 || a.key == 1 {
			continue // produce and fetch with empty bodies are exercised by their own tests
		}
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			if _, err := cl.Request(ctx, pinned{req}); err != nil {
				t.Errorf("%s v%d: %v", a.name, v, err)
			}
		}
	}
}

// pinned keeps franz-go from picking its own version of a request.
type pinned struct{ kmsg.Request }

func (p pinned) IsAdminRequest() bool { return false }

func TestAPIVersionsSoftwareName(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "bad name!", "1.0"
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("invalid software name: error %d, want INVALID_REQUEST", resp.ErrorCode)
	}
	req.ClientSoftwareName = "good-name"
	if resp, err = req.RequestWith(ctxT(t), cl); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("valid request: %v %+v", err, resp)
	}
}

func TestCreateDescribeDeleteTopics(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) { c.AutoCreateTopicsEnable = false })
	adm := testAdmin(t, b)
	ctx := ctxT(t)

	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "orders", "payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range created.Sorted() {
		if c.Err != nil {
			t.Fatalf("create %s: %v", c.Topic, c.Err)
		}
		if c.NumPartitions != 3 || c.ReplicationFactor != 1 || c.ID == (kadm.TopicID{}) {
			t.Errorf("create %s: partitions %d rf %d id %v", c.Topic, c.NumPartitions, c.ReplicationFactor, c.ID)
		}
	}
	again, _ := adm.CreateTopics(ctx, 1, 1, nil, "orders")
	if err := again["orders"].Err; !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	bad, _ := adm.CreateTopics(ctx, 1, 3, nil, "rf3")
	if err := bad["rf3"].Err; !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("rf 3: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	badName, _ := adm.CreateTopics(ctx, 1, 1, nil, "no/slash")
	if err := badName["no/slash"].Err; !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("bad name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	badCfg, _ := adm.CreateTopics(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, "badcfg")
	if err := badCfg["badcfg"].Err; !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("bad config: %v, want INVALID_CONFIG", err)
	}

	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Topics.Names(); !slices.Equal(got, []string{"orders", "payments"}) {
		t.Errorf("topics %v", got)
	}
	for _, p := range md.Topics["orders"].Partitions {
		if p.Leader != b.cfg.NodeID || !slices.Equal(p.Replicas, []int32{b.cfg.NodeID}) {
			t.Errorf("partition %d: leader %d replicas %v", p.Partition, p.Leader, p.Replicas)
		}
	}

	cfgs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sawRetention, sawSegment bool
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms":
			sawRetention = c.MaybeValue() == "60000" && c.Source == kmsg.ConfigSourceDynamicTopicConfig
		case "segment.bytes":
			sawSegment = c.MaybeValue() == "1073741824" && c.Source == kmsg.ConfigSourceDefaultConfig
		}
	}
	if !sawRetention || !sawSegment {
		t.Errorf("describe configs: retention override seen %v, segment default seen %v: %+v", sawRetention, sawSegment, rc.Configs)
	}

	del, err := adm.DeleteTopics(ctx, "payments", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if del["payments"].Err != nil {
		t.Errorf("delete payments: %v", del["payments"].Err)
	}
	if !errors.Is(del["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete nope: %v", del["nope"].Err)
	}
	// kgo may answer a metadata request from its cache; ask the broker.
	if got := b.meta.Load().names(); !slices.Equal(got, []string{"orders"}) {
		t.Errorf("after delete: topics %v", got)
	}
}

func TestAlterConfigsAndPartitions(t *testing.T) {
	b := testBroker(t)
	adm := testAdmin(t, b)
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("1000")},
	}, "t")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("incremental alter: %v %v", err, resps)
	}
	resps, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")}}, "t")
	if resps[0].Err != nil {
		t.Fatalf("append: %v", resps[0].Err)
	}
	resps, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")}}, "t")
	if !errors.Is(resps[0].Err, kerr.InvalidConfig) {
		t.Errorf("unknown key: %v, want INVALID_CONFIG", resps[0].Err)
	}
	tp := b.topic("t")
	if got := tp.partitions[0].Config(); !slices.Equal(got.CleanupPolicy, []string{"compact", "delete"}) || got.RetentionBytes != 1000 {
		t.Errorf("effective config %+v", got)
	}

	// AlterConfigs (not incremental) replaces the whole set.
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("5000")}}, "t")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("alter configs: %v %v", err, resps)
	}
	if got := b.topic("t").overrides; len(got) != 1 || got["retention.ms"] != "5000" {
		t.Errorf("overrides after AlterConfigs: %v", got)
	}

	cp, err := adm.CreatePartitions(ctx, 3, "t")
	if err != nil || cp["t"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, cp)
	}
	if n := len(b.topic("t").partitions); n != 4 {
		t.Errorf("partitions %d, want 4", n)
	}
	cp, _ = adm.UpdatePartitions(ctx, 2, "t")
	if !errors.Is(cp["t"].Err, kerr.InvalidPartitions) {
		t.Errorf("shrink: %v, want INVALID_PARTITIONS", cp["t"].Err)
	}
}

func TestTopicsSurviveRestart(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.Listeners = "127.0.0.1:0"
	cfg.LogDirs = t.TempDir()
	b, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(func() *kgo.Client {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
		return cl
	}())
	ctx := ctxT(t)
	created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("12345")}, "kept")
	if err != nil {
		t.Fatal(err)
	}
	adm.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := startBroker(t, cfg)
	tp := b2.topic("kept")
	if tp == nil {
		t.Fatal("topic lost across restart")
	}
	if tp.id != created.ID || len(tp.partitions) != 2 || tp.overrides["retention.ms"] != "12345" {
		t.Errorf("after restart: id %x partitions %d overrides %v", tp.id, len(tp.partitions), tp.overrides)
	}
	if b2.clusterID != b.clusterID {
		t.Errorf("cluster ID changed: %s then %s", b.clusterID, b2.clusterID)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) { c.NumPartitions = 3 })
	cl := testClient(t, b)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("auto-create: %+v", resp.Topics)
	}
	req.AllowAutoTopicCreation = false
	req.Topics[0].Topic = kmsg.StringPtr("not-auto")
	resp, err = req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("no auto-create: error %d", resp.Topics[0].ErrorCode)
	}
}
