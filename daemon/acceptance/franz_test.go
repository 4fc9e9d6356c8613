package acceptance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func franzCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// franzProduce writes w with one idempotent acks=all franz-go producer per
// partition, each using that partition's codec.
func franzProduce(t *testing.T, addr string, w *workload) {
	ctx := testCtx(t, 3*time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	setErr := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	for p := range int32(len(codecs)) {
		cl := newClient(t, addr,
			kgo.DefaultProduceTopic(w.topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(franzCodec(codecs[p])),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
		wg.Go(func() {
			for i := range w.perPart {
				r := &kgo.Record{
					Partition: p,
					Key:       w.key(p, i),
					Value:     w.value(p, i),
					Timestamp: time.UnixMilli(w.timestamp(i)),
				}
				for _, h := range w.headers(p, i) {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.key, Value: []byte(h.value)})
				}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						setErr(err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				setErr(err)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("franz-go produce: %v", firstErr)
	}
}

// franzConsume reads every partition of w's topic from the start.
func franzConsume(t *testing.T, addr string, w *workload) map[int32][]got {
	to := map[int32]int64{}
	for p := range int32(len(codecs)) {
		to[p] = int64(w.perPart)
	}
	out := map[int32][]got{}
	for p, rs := range consume(t, addr, w.topic, nil, to) {
		for _, r := range rs {
			out[p] = append(out[p], franzGot(r))
		}
	}
	return out
}

func franzGot(r *kgo.Record) got {
	g := got{
		partition: r.Partition, offset: r.Offset,
		key: r.Key, nullKey: r.Key == nil,
		value: r.Value, ts: r.Timestamp.UnixMilli(),
	}
	for _, h := range r.Headers {
		g.headers = append(g.headers, hdr{h.Key, string(h.Value)})
	}
	return g
}

// fetchOne returns the first record a fresh consumer gets when it starts
// at offset of topic/partition.
func fetchOne(t *testing.T, addr, topic string, partition int32, offset int64) *kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().At(offset)},
	}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("fetch %s[%d]@%d: timed out", topic, partition, offset)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch %s[%d]@%d: %v", topic, partition, offset, e.Err)
		}
		if rs := fs.Records(); len(rs) > 0 {
			return rs[0]
		}
	}
}
