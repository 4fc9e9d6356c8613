package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vltava/vltava/core/config"
)

// TestCompactedTopicConsumer produces 100,000 records over 1,000 keys to
// a cleanup.policy=compact topic, lets the broker's cleaner compact it,
// and checks that a franz-go consumer reading from the start sees exactly
// each key's latest value at its original offset.
func TestCompactedTopicConsumer(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) { c.LogCleanerBackoffMs = 50 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(testClient(t, b))
	const topic = "compacted"
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("65536"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	prod := testClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	const n, keys = 100_000, 1000
	latest := map[string]int64{} // key -> offset of its latest record
	for i := 0; i < n; i += 1000 {
		var rs []*kgo.Record
		for j := i; j < i+1000; j++ {
			rs = append(rs, &kgo.Record{Key: []byte("key-" + strconv.Itoa(j%keys)), Value: []byte("v" + strconv.Itoa(j))})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			latest[string(r.Key)] = r.Offset
		}
	}
	// One more batch rolls the old segments out of the active one; the
	// maintenance loop flushes after the roll and the cleaner then runs.
	p := b.meta.Load().byName[topic].partitions[0]
	if err := p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	rolledAt := p.log.EndOffset()
	before := p.log.Size()
	// Wait for a pass that covered every segment below the roll (its
	// cleaner checkpoint, core/log/doc.go, reaches the roll offset): the
	// size alone falls below the bound while a pass is still swapping in
	// its last groups, whose duplicates a consumer would then see.
	cleanedTo := func() int64 {
		ck, err := os.ReadFile(filepath.Join(p.log.Dir(), "cleaner-offset.checkpoint"))
		if err != nil || len(ck) < 13 {
			return -1
		}
		return int64(binary.BigEndian.Uint64(ck[5:13]))
	}
	for p.log.Size() > before/20 || cleanedTo() < rolledAt {
		select {
		case <-ctx.Done():
			t.Fatalf("log still %d bytes (was %d), cleaned to %d of %d: not compacted", p.log.Size(), before, cleanedTo(), rolledAt)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cons := testClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int64{}
	for len(seen) < keys {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if _, dup := seen[k]; dup {
				t.Fatalf("key %s seen twice (offsets %d, %d)", k, seen[k], r.Offset)
			}
			if want := fmt.Sprintf("v%d", r.Offset); string(r.Value) != want {
				t.Fatalf("record at %d has value %q, want %q", r.Offset, r.Value, want)
			}
			seen[k] = r.Offset
		})
	}
	for k, off := range latest {
		if seen[k] != off {
			t.Fatalf("key %s: consumer saw offset %d, latest is %d", k, seen[k], off)
		}
	}
}
