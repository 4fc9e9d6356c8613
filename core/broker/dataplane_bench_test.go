package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/config"
)

// benchBroker starts a broker for a benchmark, closed when it ends.
func benchBroker(tb testing.TB, zeroCopy bool) *Broker {
	cfg := config.DefaultBroker()
	cfg.Listeners = "127.0.0.1:0"
	cfg.LogDirs = tb.TempDir()
	cfg.ZeroCopy = zeroCopy
	b, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := b.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

func benchClient(tb testing.TB, b *Broker, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// BenchmarkProduceConsume produces b.N records of 1 KiB with a franz-go
// producer (idempotent, uncompressed) to a 4-partition topic of an
// in-process broker over loopback, then consumes them all. It reports the
// produce and consume rates separately (produce-MB/s, consume-MB/s); the
// standard MB/s covers both phases.
func BenchmarkProduceConsume(b *testing.B) {
	for _, zeroCopy := range []bool{true, false} {
		b.Run(fmt.Sprintf("zerocopy=%v", zeroCopy), func(b *testing.B) {
			benchProduceConsume(b, zeroCopy)
		})
	}
}

func benchProduceConsume(b *testing.B, zeroCopy bool) {
	const recordSize = 1024
	br := benchBroker(b, zeroCopy)
	ctx := context.Background()
	admin := benchClient(b, br)
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 4, 1, nil, "bench"); err != nil {
		b.Fatal(err)
	}
	prod := benchClient(b, br, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("bench"))
	cons := benchClient(b, br, kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	value := make([]byte, recordSize)
	rand.Read(value)

	b.SetBytes(recordSize)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	produced := time.Since(start)
	start = time.Now()
	for n := 0; n < b.N; {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) { b.Fatalf("fetch %s-%d: %v", t, p, err) })
		n += fs.NumRecords()
	}
	consumed := time.Since(start)
	b.StopTimer()
	mb := float64(b.N) * recordSize / 1e6
	b.ReportMetric(mb/produced.Seconds(), "produce-MB/s")
	b.ReportMetric(mb/consumed.Seconds(), "consume-MB/s")
}
