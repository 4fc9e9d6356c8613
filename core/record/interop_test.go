package record_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
)

// captureCluster starts an in-process kfake broker that records the raw
// bytes of every produced partition's record batches.
func captureCluster(t *testing.T, topic string) (addr string, batches func() [][]byte) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var got [][]byte
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.Topics {
			for _, p := range tp.Partitions {
				for rest := p.Records; len(rest) > 0; {
					_, b, r, err := record.Next(rest)
					if err != nil {
						t.Errorf("splitting produced records: %v", err)
						break
					}
					got = append(got, slices.Clone(b))
					rest = r
				}
			}
		}
		return nil, nil, false
	})
	return c.ListenAddrs()[0], func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// checkProduced validates every captured batch and checks that the
// values read back are the n values sent, in order.
func checkProduced(t *testing.T, batches [][]byte, codec record.Codec, n int) {
	t.Helper()
	if len(batches) == 0 {
		t.Fatal("no batch captured")
	}
	var values []string
	for _, b := range batches {
		h, err := record.Validate(b, record.ValidateOptions{MaxBatchBytes: 1 << 20})
		if err != nil {
			t.Fatalf("client batch refused: %v", err)
		}
		if h.Codec() != codec {
			t.Errorf("client sent codec %s, want %s", h.Codec(), codec)
		}
		if err := record.Records(b, 0, func(r record.Record) error {
			values = append(values, string(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(values) != n {
		t.Fatalf("%d values, want %d", len(values), n)
	}
	for i, v := range values {
		if v != value(i) {
			t.Fatalf("value %d = %.20q", i, v)
		}
	}
}

func value(i int) string { return fmt.Sprintf("value-%04d-%s", i, payload(200)) }

func TestInteropFranzGo(t *testing.T) {
	kcodecs := map[record.Codec]kgo.CompressionCodec{
		record.CodecNone: kgo.NoCompression(), record.CodecGzip: kgo.GzipCompression(),
		record.CodecSnappy: kgo.SnappyCompression(), record.CodecLZ4: kgo.Lz4Compression(),
		record.CodecZstd: kgo.ZstdCompression(),
	}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			addr, batches := captureCluster(t, "t")
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kcodecs[codec]), kgo.DefaultProduceTopic("t"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var rs []*kgo.Record
			for i := range 50 {
				rs = append(rs, &kgo.Record{Key: []byte("k"), Value: []byte(value(i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			checkProduced(t, batches(), codec, len(rs))
		})
	}
}

func TestInteropSarama(t *testing.T) {
	scodecs := map[record.Codec]sarama.CompressionCodec{
		record.CodecNone: sarama.CompressionNone, record.CodecGzip: sarama.CompressionGZIP,
		record.CodecSnappy: sarama.CompressionSnappy, record.CodecLZ4: sarama.CompressionLZ4,
		record.CodecZstd: sarama.CompressionZSTD,
	}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			addr, batches := captureCluster(t, "t")
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V3_0_0_0
			cfg.Producer.Return.Successes = true
			cfg.Producer.Compression = scodecs[codec]
			cfg.Producer.Flush.Messages = 50
			cfg.Producer.Flush.Frequency = time.Second
			p, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var ms []*sarama.ProducerMessage
			for i := range 50 {
				ms = append(ms, &sarama.ProducerMessage{Topic: "t", Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(value(i))})
			}
			if err := p.SendMessages(ms); err != nil {
				t.Fatal(err)
			}
			checkProduced(t, batches(), codec, len(ms))
		})
	}
}
