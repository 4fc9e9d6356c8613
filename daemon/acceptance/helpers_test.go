package acceptance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// startDaemon starts vltavad with the broker keys of cfg written to a YAML
// config file (no file when cfg is empty). The harness stops it at cleanup.
func startDaemon(t *testing.T, cfg map[string]string) *daemontest.Proc {
	t.Helper()
	bin := daemontest.Build(t)
	var args []string
	if len(cfg) > 0 {
		keys := make([]string, 0, len(cfg))
		for k := range cfg {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %s\n", k, cfg[k])
		}
		path := filepath.Join(t.TempDir(), "vltavad.yaml")
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	return daemontest.Start(t, bin, args...)
}

// newClient returns a franz-go client for addr, closed at cleanup.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("acceptance")}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client for addr, closed at cleanup.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// testCtx is a context bounded by d and cancelled at cleanup, so a hung
// daemon fails a test instead of stalling the run.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic with partitions and the given topic configs.
func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(testCtx(t, 30*time.Second), partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// offsets lists the start or end offsets of every partition of topic.
func offsets(t *testing.T, adm *kadm.Client, topic string, end bool) map[int32]int64 {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	list := adm.ListStartOffsets
	if end {
		list = adm.ListEndOffsets
	}
	l, err := list(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// consume reads every partition of topic from the offset in from (start
// of log when absent) up to the offset in to (exclusive) with a fresh
// franz-go client, and fails the test on any fetch error.
func consume(t *testing.T, addr, topic string, from, to map[int32]int64, opts ...kgo.Opt) map[int32][]*kgo.Record {
	t.Helper()
	parts := map[int32]kgo.Offset{}
	want := 0
	for p, end := range to {
		start, ok := from[p]
		if !ok {
			parts[p] = kgo.NewOffset().AtStart()
		} else {
			parts[p] = kgo.NewOffset().At(start)
		}
		if end > start {
			want++
		}
	}
	out := map[int32][]*kgo.Record{}
	if want == 0 {
		return out
	}
	opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	cl := newClient(t, addr, opts...)
	defer cl.Close()
	ctx := testCtx(t, 90*time.Second)
	done := map[int32]bool{}
	for len(done) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: timed out; have %s, want ends %v", topic, counts(out), to)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume %s[%d]: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= to[r.Partition] {
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
			if r.Offset == to[r.Partition]-1 {
				done[r.Partition] = true
			}
		})
	}
	return out
}

// counts summarises consumed records per partition for failure messages.
func counts(recs map[int32][]*kgo.Record) string {
	var b strings.Builder
	for p, rs := range recs {
		last := int64(-1)
		if len(rs) > 0 {
			last = rs[len(rs)-1].Offset
		}
		fmt.Fprintf(&b, "p%d: %d records up to offset %d; ", p, len(rs), last)
	}
	return b.String()
}

// produceSync produces recs and fails the test on any error.
func produceSync(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// waitFor polls cond every 100ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isClosed reports whether err means the peer closed the connection.
func isClosed(err error) bool {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// checkTimestampLookup asks ListOffsets for the first offset at or after
// ts in every partition of topic and compares with Kafka's definition
// applied to recs (the partitions' records from the log start): the
// earliest offset whose timestamp is >= ts, or the end offset when no
// record is that late (kadm asks for the end offset when the broker
// answers -1).
func checkTimestampLookup(t *testing.T, adm *kadm.Client, topic string, ts int64, recs map[int32][]*kgo.Record, ends map[int32]int64) {
	t.Helper()
	l, err := adm.ListOffsetsAfterMilli(testCtx(t, 30*time.Second), ts, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		t.Fatalf("ListOffsetsAfterMilli(%d): %v", ts, err)
	}
	for p, end := range ends {
		want := end
		for _, r := range recs[p] {
			if r.Timestamp.UnixMilli() >= ts {
				want = r.Offset
				break
			}
		}
		o, ok := l.Lookup(topic, p)
		if !ok {
			t.Errorf("ListOffsetsAfterMilli(%d): no answer for partition %d", ts, p)
			continue
		}
		if o.Offset != want {
			t.Errorf("ListOffsetsAfterMilli(%d) partition %d: offset %d, want %d (end %d)", ts, p, o.Offset, want, end)
		}
	}
}
