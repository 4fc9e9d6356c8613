package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// testCtx is a context for one test's requests, canceled when it ends.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic through the Kafka API.
func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), partitions, 1, configs, name); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// request sends req straight to the broker (no sharding, no retries) at
// the highest version both sides know.
func request[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

// produceRaw sends one produce request with the given batches, one per
// partition of topic, and returns the partitions' answers in order.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, batches map[int32][]byte) map[int32]kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p, batch := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ProduceResponse](t, cl, req)
	out := map[int32]kmsg.ProduceResponseTopicPartition{}
	for _, st := range resp.Topics {
		if st.Topic != topic {
			t.Fatalf("produce answered topic %q, want %q", st.Topic, topic)
		}
		for _, sp := range st.Partitions {
			out[sp.Partition] = sp
		}
	}
	if len(out) != len(batches) {
		t.Fatalf("produce answered %d partitions, sent %d", len(out), len(batches))
	}
	return out
}

// produceOne produces one batch to partition 0 and fails the test on an
// error code.
func produceOne(t *testing.T, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	sp := produceRaw(t, cl, topic, map[int32][]byte{0: batch})[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return sp
}

// consume reads n records from the start of topic with a franz-go consumer.
func consume(t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(recs), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		recs = append(recs, fs.Records()...)
	}
	if len(recs) != n {
		t.Fatalf("consumed %d records, want %d", len(recs), n)
	}
	return recs
}

func consumer(t *testing.T, b *Broker, topic string, opts ...kgo.Opt) *kgo.Client {
	return testClient(t, b, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
}

func TestProduceConsumeRoundtrip(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		want  record.Codec
	}{
		{"none", kgo.NoCompression(), record.CodecNone},
		{"gzip", kgo.GzipCompression(), record.CodecGzip},
		{"snappy", kgo.SnappyCompression(), record.CodecSnappy},
		{"lz4", kgo.Lz4Compression(), record.CodecLZ4},
		{"zstd", kgo.ZstdCompression(), record.CodecZstd},
	}
	b := testBroker(t)
	admin := testClient(t, b)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "roundtrip-" + c.name
			const partitions, perPartition = 3, 40
			createTopic(t, admin, topic, partitions, nil)
			prod := testClient(t, b, kgo.ProducerBatchCompression(c.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			base := time.UnixMilli(1_700_000_000_000)
			var sent []*kgo.Record
			for i := range partitions * perPartition {
				sent = append(sent, &kgo.Record{
					Topic:     topic,
					Partition: int32(i % partitions),
					Key:       fmt.Appendf(nil, "key-%d", i),
					Value:     []byte(strings.Repeat(fmt.Sprintf("value %d; ", i), 20)), // compressible
					Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty"}},
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				})
			}
			if err := prod.ProduceSync(testCtx(t), sent...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}

			got := consume(t, consumer(t, b, topic), len(sent))
			byKey := map[string]*kgo.Record{}
			next := map[int32]int64{}
			for _, r := range got {
				if r.Offset != next[r.Partition] {
					t.Fatalf("partition %d: offset %d, want %d (offsets must be contiguous)", r.Partition, r.Offset, next[r.Partition])
				}
				next[r.Partition]++
				byKey[string(r.Key)] = r
			}
			for _, s := range sent {
				r := byKey[string(s.Key)]
				switch {
				case r == nil:
					t.Fatalf("record %s not consumed", s.Key)
				case r.Partition != s.Partition || !bytes.Equal(r.Value, s.Value) || !r.Timestamp.Equal(s.Timestamp):
					t.Fatalf("record %s: got partition %d ts %v value %q, sent partition %d ts %v value %q",
						s.Key, r.Partition, r.Timestamp, r.Value, s.Partition, s.Timestamp, s.Value)
				case len(r.Headers) != 2 || r.Headers[0].Key != "h" || !bytes.Equal(r.Headers[0].Value, s.Headers[0].Value) || r.Headers[1].Key != "empty":
					t.Fatalf("record %s: headers %v, sent %v", s.Key, r.Headers, s.Headers)
				}
			}
			// The batches are stored as the producer compressed them.
			first := fetchBatches(t, b, admin, topic, 0, 0)
			if len(first) == 0 {
				t.Fatal("raw fetch returned no batch")
			}
			if h, _ := record.ParseHeader(first[0]); h.Codec() != c.want {
				t.Fatalf("stored batch codec %v, want %v", h.Codec(), c.want)
			}
		})
	}
}

func TestProduceLogAppendTime(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	lat := "LogAppendTime"
	createTopic(t, cl, "lat", 1, map[string]*string{"message.timestamp.type": &lat})

	before := time.Now().UnixMilli()
	old := int64(1000) // far in the past: the broker must replace it
	sp := produceOne(t, cl, "lat", recordtest.Batch(record.CodecNone,
		recordtest.Rec{Value: []byte("a"), Timestamp: old}, recordtest.Rec{Value: []byte("b"), Timestamp: old + 1}))
	after := time.Now().UnixMilli()
	if sp.LogAppendTime < before || sp.LogAppendTime > after {
		t.Fatalf("LogAppendTime %d, want broker time in [%d, %d]", sp.LogAppendTime, before, after)
	}
	for _, r := range consume(t, consumer(t, b, "lat"), 2) {
		if r.Timestamp.UnixMilli() != sp.LogAppendTime || r.Attrs.TimestampType() != 1 {
			t.Fatalf("record %q: timestamp %d type %d, want %d type 1 (LogAppendTime)",
				r.Value, r.Timestamp.UnixMilli(), r.Attrs.TimestampType(), sp.LogAppendTime)
		}
	}

	// A CreateTime topic answers -1 and keeps the producer's timestamp.
	createTopic(t, cl, "ct", 1, nil)
	sp = produceOne(t, cl, "ct", recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("c"), Timestamp: old}))
	if sp.LogAppendTime != -1 {
		t.Fatalf("CreateTime topic: LogAppendTime %d, want -1", sp.LogAppendTime)
	}
	if r := consume(t, consumer(t, b, "ct"), 1)[0]; r.Timestamp.UnixMilli() != old {
		t.Fatalf("CreateTime record timestamp %d, want %d", r.Timestamp.UnixMilli(), old)
	}
}

func TestProduceIdempotent(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "idem", 1, nil)
	pid := initProducerID(t, cl)

	batch := func(seq int32, vals ...string) []byte {
		var recs []recordtest.Rec
		for _, v := range vals {
			recs = append(recs, recordtest.Rec{Value: []byte(v), Timestamp: 1})
		}
		return recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: pid, Epoch: 0, BaseSequence: seq}}, recs...)
	}
	first := produceOne(t, cl, "idem", batch(0, "a", "b"))
	second := produceOne(t, cl, "idem", batch(2, "c"))
	if first.BaseOffset != 0 || second.BaseOffset != 2 {
		t.Fatalf("base offsets %d, %d; want 0, 2", first.BaseOffset, second.BaseOffset)
	}
	// A resend of an acknowledged batch is a duplicate: its original
	// offset, no error, nothing appended.
	if dup := produceOne(t, cl, "idem", batch(0, "a", "b")); dup.BaseOffset != 0 {
		t.Fatalf("duplicate answered base offset %d, want 0", dup.BaseOffset)
	}
	// A sequence gap is refused.
	gap := produceRaw(t, cl, "idem", map[int32][]byte{0: batch(7, "x")})[0]
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(gap.ErrorCode))
	}
	if hw := listOffset(t, cl, "idem", 0, -1).Offset; hw != 3 {
		t.Fatalf("high watermark %d after duplicate and gap, want 3", hw)
	}

	// franz-go's default producer is idempotent and goes through the same path.
	prod := testClient(t, b)
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: "idem", Value: []byte("kgo")}).FirstErr(); err != nil {
		t.Fatalf("idempotent kgo produce: %v", err)
	}
	recs := consume(t, consumer(t, b, "idem"), 4)
	if string(recs[3].Value) != "kgo" || recs[3].Offset != 3 {
		t.Fatalf("last record %q at %d, want \"kgo\" at 3", recs[3].Value, recs[3].Offset)
	}
}

func TestProduceBadBatchIsolated(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "iso", 2, nil)
	good := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("good"), Timestamp: 1})
	bad := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("bad"), Timestamp: 1})
	bad[len(bad)-1] ^= 0xff // after the CRC was computed

	res := produceRaw(t, cl, "iso", map[int32][]byte{0: bad, 1: good})
	if res[0].ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt batch: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(res[0].ErrorCode))
	}
	if res[0].ErrorMessage == nil || *res[0].ErrorMessage == "" {
		t.Fatal("corrupt batch: no error message (produce v8+)")
	}
	if res[1].ErrorCode != 0 || res[1].BaseOffset != 0 {
		t.Fatalf("good partition: %v at %d, want success at 0", kerr.ErrorForCode(res[1].ErrorCode), res[1].BaseOffset)
	}
	if hw := listOffset(t, cl, "iso", 0, -1).Offset; hw != 0 {
		t.Fatalf("partition 0 high watermark %d after a refused batch, want 0", hw)
	}
	if hw := listOffset(t, cl, "iso", 1, -1).Offset; hw != 1 {
		t.Fatalf("partition 1 high watermark %d, want 1", hw)
	}
}

func TestProduceRefusals(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	small := "200"
	createTopic(t, cl, "small", 1, map[string]*string{"max.message.bytes": &small})
	createTopic(t, cl, "ok", 1, nil)
	rec := recordtest.Rec{Value: []byte("v"), Timestamp: 1}
	one := recordtest.Batch(record.CodecNone, rec)

	for _, c := range []struct {
		name, topic string
		partition   int32
		records     []byte
		want        *kerr.Error
	}{
		{"too large", "small", 0, recordtest.Batch(record.CodecNone, recordtest.Rec{Value: make([]byte, 300), Timestamp: 1}), kerr.MessageTooLarge},
		{"unknown topic", "nope", 0, one, kerr.UnknownTopicOrPartition},
		{"unknown partition", "ok", 5, one, kerr.UnknownTopicOrPartition},
		{"two batches", "ok", 0, append(append([]byte(nil), one...), one...), kerr.InvalidRecord},
		{"empty records", "ok", 0, []byte{}, kerr.InvalidRecord},
		{"truncated", "ok", 0, one[:30], kerr.CorruptMessage},
		{"transactional", "ok", 0, recordtest.Build(recordtest.Options{Transactional: true, Producer: &recordtest.Producer{ID: 1}}, rec), kerr.InvalidTxnState},
	} {
		t.Run(c.name, func(t *testing.T) {
			sp := produceRaw(t, cl, c.topic, map[int32][]byte{c.partition: c.records})[c.partition]
			if sp.ErrorCode != c.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(sp.ErrorCode), c.want)
			}
			if sp.BaseOffset != -1 {
				t.Fatalf("refused batch answered base offset %d, want -1", sp.BaseOffset)
			}
		})
	}
	if hw := listOffset(t, cl, "ok", 0, -1).Offset; hw != 0 {
		t.Fatalf("high watermark %d after refused batches, want 0", hw)
	}
}

// rawConn sends requests over a plain socket, bypassing the client's
// request rewriting (franz-go fixes up acks, for one).
type rawConn struct {
	t    *testing.T
	conn net.Conn
	corr int32
}

func dialRaw(t *testing.T, b *Broker) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, conn: c}
}

// send writes req at its version with a v1 or v2 request header.
func (r *rawConn) send(req kmsg.Request) {
	r.t.Helper()
	r.corr++
	body := kbin.AppendInt16(nil, req.Key())
	body = kbin.AppendInt16(body, req.GetVersion())
	body = kbin.AppendInt32(body, r.corr)
	body = kbin.AppendNullableString(body, nil)
	if req.IsFlexible() {
		body = append(body, 0) // no header tags
	}
	body = req.AppendTo(body)
	if _, err := r.conn.Write(append(kbin.AppendInt32(nil, int32(len(body))), body...)); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one response into resp, or returns the read error.
func (r *rawConn) recv(resp kmsg.Response) error {
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		return err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.conn, buf); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != r.corr {
		r.t.Fatalf("correlation id %d, want %d", corr, r.corr)
	}
	buf = buf[4:]
	if resp.IsFlexible() {
		buf = buf[1:] // no header tags
	}
	return resp.ReadFrom(buf)
}

func produceRequest(acks int16, topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 8, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestProduceInvalidAcks(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "acks", 1, nil)
	rc := dialRaw(t, b)
	req := produceRequest(2, "acks", valueBatch("v"))
	rc.send(req)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if err := rc.recv(resp); err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: %v, want INVALID_REQUIRED_ACKS", kerr.ErrorForCode(code))
	}
	if hw := listOffset(t, cl, "acks", 0, -1).Offset; hw != 0 {
		t.Fatalf("high watermark %d, want 0", hw)
	}
}

// TestProduceAcksZeroError checks Kafka's answer to a failed acks=0
// produce: no response, the connection is closed.
func TestProduceAcksZeroError(t *testing.T) {
	b := testBroker(t)
	rc := dialRaw(t, b)
	rc.send(produceRequest(0, "no-such-topic", valueBatch("v")))
	if err := rc.recv(kmsg.NewPtrProduceResponse()); err == nil {
		t.Fatal("a response came back to a failed acks=0 produce")
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after failed acks=0 produce: %v, want the connection closed", err)
	}
}

func TestProduceAcksZero(t *testing.T) {
	b := testBroker(t)
	createTopic(t, testClient(t, b), "acks0", 1, nil)
	prod := testClient(t, b, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	const n = 50
	for i := range n {
		prod.Produce(testCtx(t), &kgo.Record{Topic: "acks0", Value: fmt.Appendf(nil, "%d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("acks=0 produce: %v", err)
			}
		})
	}
	if err := prod.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i, r := range consume(t, consumer(t, b, "acks0"), n) {
		if string(r.Value) != fmt.Sprint(i) {
			t.Fatalf("record %d: %q", i, r.Value)
		}
	}
}

func TestProduceErrorCodeMapping(t *testing.T) {
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("x: %w", kerr.MessageTooLarge), kerr.MessageTooLarge},
		{fmt.Errorf("x: %w", record.ErrCorrupt), kerr.CorruptMessage},
		{fmt.Errorf("x: %w", log.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber},
		{fmt.Errorf("x: %w", log.ErrInvalidProducerEpoch), kerr.InvalidProducerEpoch},
		{errors.New("disk on fire"), kerr.KafkaStorageError},
	} {
		if got := produceErrorCode(c.err); got != c.want {
			t.Errorf("produceErrorCode(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// FuzzProduceFraming feeds arbitrary bytes through the produce checks
// that run before the log: they must refuse with a Kafka error code, never
// panic, and accept only exactly one valid batch.
func FuzzProduceFraming(f *testing.F) {
	one := valueBatch("a", "b")
	f.Add(one)
	f.Add(append(append([]byte(nil), one...), one...))
	f.Add(one[:40])
	f.Add(recordtest.Batch(record.CodecZstd, recordtest.Rec{Value: []byte("z")}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		err := checkProduceFraming(data, 5)
		if err == nil {
			_, err = record.Validate(data, record.ValidateOptions{MaxBatchBytes: 1 << 20})
		}
		if err == nil {
			h, batch, rest, perr := record.Next(data)
			if perr != nil || len(rest) != 0 || len(batch) != len(data) || h.Codec() == record.CodecZstd {
				t.Fatalf("accepted %d bytes that are not exactly one batch a v5 produce may carry", len(data))
			}
			return
		}
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			t.Fatalf("refusal without a Kafka error code: %v", err)
		}
	})
}

// TestProduceRecompressesToTopicCodec: a topic whose compression.type
// names a codec stores every produced batch in that codec (Kafka
// recompresses on append), whatever the producer used, and consumers get
// the records back intact; "producer" keeps the producer's codec.
func TestProduceRecompressesToTopicCodec(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	ctx := testCtx(t)
	storedCodecs := func(topic string) []record.Codec {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.ReplicaID = 12, 1<<20, -1
		td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil {
			t.Fatalf("describe %s: %v %v", topic, err, td[topic].Err)
		}
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, td[topic].ID // the client picks the version: names or IDs
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch %s: %+v", topic, resp.Topics)
		}
		var out []record.Codec
		rest := resp.Topics[0].Partitions[0].RecordBatches
		for len(rest) > 0 {
			h, _, r, err := record.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, h.Codec())
			rest = r
		}
		return out
	}
	for _, c := range []struct {
		topicType string
		want      record.Codec // for batches from every producer codec; -1: as produced
	}{
		{"zstd", record.CodecZstd},
		{"gzip", record.CodecGzip},
		{"uncompressed", record.CodecNone},
		{"producer", -1},
	} {
		topic := "recompress-" + c.topicType
		createTopic(t, cl, topic, 1, map[string]*string{"compression.type": kmsg.StringPtr(c.topicType)})
		var produced []record.Codec
		for _, pc := range []struct {
			opt   kgo.CompressionCodec
			codec record.Codec
		}{{kgo.NoCompression(), record.CodecNone}, {kgo.SnappyCompression(), record.CodecSnappy}, {kgo.Lz4Compression(), record.CodecLZ4}, {kgo.ZstdCompression(), record.CodecZstd}} {
			p := testClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(pc.opt), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			var rs []*kgo.Record
			for i := range 20 {
				rs = append(rs, &kgo.Record{Value: []byte(strings.Repeat("compressible ", 10) + strconv.Itoa(i))})
			}
			if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("%s: produce with %s: %v", topic, pc.codec, err)
			}
			produced = append(produced, pc.codec)
		}
		got := storedCodecs(topic)
		want := produced
		if c.want >= 0 {
			want = nil
			for range produced {
				want = append(want, c.want)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: stored codecs %v, want %v", topic, got, want)
		}
		recs := consume(t, consumer(t, b, topic), 80)
		for i, r := range recs {
			if want := strings.Repeat("compressible ", 10) + strconv.Itoa(i%20); string(r.Value) != want {
				t.Fatalf("%s: record %d = %q, want %q", topic, i, r.Value, want)
			}
		}
	}
}
