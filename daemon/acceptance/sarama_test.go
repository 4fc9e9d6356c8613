package acceptance

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "acceptance-sarama"
	cfg.Version = sarama.V3_0_0_0 // headers, CreateTime timestamps and zstd
	return cfg
}

func saramaCodec(name string) sarama.CompressionCodec {
	switch name {
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

// saramaProduce writes w with one sarama async producer per partition,
// each using that partition's codec, acks=all.
func saramaProduce(t *testing.T, addr string, w *workload) {
	var wg sync.WaitGroup
	errs := make(chan error, len(codecs))
	for p := range int32(len(codecs)) {
		cfg := saramaConfig()
		cfg.Producer.Compression = saramaCodec(codecs[p])
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 0 // a retry could reorder; any error fails the test
		prod, err := sarama.NewAsyncProducer([]string{addr}, cfg)
		if err != nil {
			t.Fatalf("sarama producer: %v", err)
		}
		wg.Go(func() { saramaRun(prod, w, p, errs) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("sarama produce: %v", err)
	}
}

// saramaRun feeds partition p of w into prod, drains its results, closes
// it and sends the first error, if any, to errs.
func saramaRun(prod sarama.AsyncProducer, w *workload, p int32, errs chan<- error) {
	var first error
	var drained sync.WaitGroup
	acked := 0
	drained.Go(func() {
		for range prod.Successes() {
			acked++
		}
	})
	drained.Go(func() {
		for e := range prod.Errors() {
			if first == nil {
				first = e
			}
		}
	})
	for i := range w.perPart {
		m := &sarama.ProducerMessage{
			Topic:     w.topic,
			Partition: p,
			Value:     sarama.ByteEncoder(w.value(p, i)),
			Timestamp: time.UnixMilli(w.timestamp(i)),
		}
		if k := w.key(p, i); k != nil {
			m.Key = sarama.ByteEncoder(k)
		}
		for _, h := range w.headers(p, i) {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: []byte(h.value)})
		}
		prod.Input() <- m
	}
	prod.AsyncClose()
	drained.Wait()
	if first == nil && acked != w.perPart {
		first = fmt.Errorf("partition %d: %d acks for %d records", p, acked, w.perPart)
	}
	if first != nil {
		errs <- first
	}
}

// saramaConsume reads every partition of w's topic from the oldest offset
// with one sarama consumer.
func saramaConsume(t *testing.T, addr string, w *workload) map[int32][]got {
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	out := make([][]got, len(codecs))
	errs := make([]error, len(codecs))
	var wg sync.WaitGroup
	for p := range int32(len(codecs)) {
		pc, err := c.ConsumePartition(w.topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama consume %s[%d]: %v", w.topic, p, err)
		}
		wg.Go(func() {
			defer pc.Close()
			out[p], errs[p] = saramaDrain(pc, w.perPart)
		})
	}
	wg.Wait()
	res := map[int32][]got{}
	for p, rs := range out {
		if errs[p] != nil {
			t.Errorf("sarama consume %s[%d]: %v", w.topic, p, errs[p])
		}
		res[int32(p)] = rs
	}
	return res
}

// saramaDrain collects n messages from pc; it gives up after 90s or on
// the first consumer error.
func saramaDrain(pc sarama.PartitionConsumer, n int) ([]got, error) {
	var out []got
	timer := time.NewTimer(90 * time.Second)
	defer timer.Stop()
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			g := got{
				partition: m.Partition, offset: m.Offset,
				key: m.Key, nullKey: m.Key == nil,
				value: m.Value, ts: m.Timestamp.UnixMilli(),
			}
			for _, h := range m.Headers {
				g.headers = append(g.headers, hdr{string(h.Key), string(h.Value)})
			}
			out = append(out, g)
		case e := <-pc.Errors():
			return out, e
		case <-timer.C:
			return out, fmt.Errorf("timed out after %d of %d messages", len(out), n)
		}
	}
	return out, nil
}
