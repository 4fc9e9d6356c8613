package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
)

var errInjectedEIO = errors.New("injected EIO")

// rawProduce sends one acks=all record to topic/partition through cl and
// returns the partition's error code.
func rawProduce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32, value string) int16 {
	t.Helper()
	rec := kmsg.Record{Value: []byte(value)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	rb := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1,
		FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(), Records: rec.AppendTo(nil)}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// rawFetch fetches topic/partition from offset 0 through cl and returns
// the error code and the number of record bytes returned.
func rawFetch(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32) (int16, int) {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, md.Topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, 0, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, 0
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, len(sp.RecordBatches)
}

// Fault 6 of issue 9 on one broker: an fsync failure under
// flush.messages=1 is not acknowledged, the record is never returned, the
// partition and every other partition of the log directory answer
// KAFKA_STORAGE_ERROR, and the broker reports Failed (the daemon then
// stops it and exits non-zero).
func TestFsyncFailureTakesLogDirOffline(t *testing.T) {
	b := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := testClient(t, b, kgo.DisableIdempotentWrite())
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"flush.messages": kadm.StringPtr("1")}, "durable"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if code := rawProduce(ctx, t, cl, "durable", p, "synced"); code != 0 {
			t.Fatalf("produce before the failure: %v", kerr.ErrorForCode(code))
		}
		if code, n := rawFetch(ctx, t, cl, "durable", p); code != 0 || n == 0 {
			t.Fatalf("fetch before the failure: %v, %d bytes", kerr.ErrorForCode(code), n)
		}
	}
	undo := log.InjectSyncFailure(filepath.Join(b.cfg.LogDirs, "durable-0"), errInjectedEIO)
	defer undo()
	if code := rawProduce(ctx, t, cl, "durable", 0, "lost"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("acks=all produce whose fsync failed: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	select {
	case <-b.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the broker did not report its log directory offline")
	}
	if err := b.Err(); !errors.Is(err, log.ErrStorage) || !errors.Is(err, errInjectedEIO) {
		t.Fatalf("Err() = %v, want the storage error", err)
	}
	undo() // the disk "recovers": the directory stays offline
	for p := range int32(2) {
		if code, n := rawFetch(ctx, t, cl, "durable", p); code != kerr.KafkaStorageError.Code || n != 0 {
			t.Errorf("fetch of partition %d of the offline directory: %v, %d bytes, want KAFKA_STORAGE_ERROR and none", p, kerr.ErrorForCode(code), n)
		}
		if code := rawProduce(ctx, t, cl, "durable", p, "after"); code != kerr.KafkaStorageError.Code {
			t.Errorf("produce to partition %d of the offline directory: %v, want KAFKA_STORAGE_ERROR", p, kerr.ErrorForCode(code))
		}
	}
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) {
		if !errors.Is(o.Err, kerr.KafkaStorageError) {
			t.Errorf("ListOffsets of partition %d of the offline directory: %v, want KAFKA_STORAGE_ERROR", o.Partition, o.Err)
		}
	})
	if err := b.Close(); !errors.Is(err, log.ErrStorage) {
		t.Errorf("close of a broker whose log directory failed: %v, want the storage error", err)
	}
	// Restarted on the same directory, the broker serves what was
	// acknowledged and not the record whose fsync failed.
	cfg := b.cfg
	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"durable": {0: kgo.NewOffset().AtStart()}}))
	ends, err := kadm.NewClient(cl2).ListEndOffsets(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup("durable", 0); end.Offset != 1 {
		t.Fatalf("after restart: end offset %d, want 1: the acknowledged record only, never the refused one", end.Offset)
	}
	fs := cl2.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatalf("fetch after restart: %v", errs)
	}
	if recs := fs.Records(); len(recs) == 0 || string(recs[0].Value) != "synced" {
		t.Fatalf("after restart the log starts with %v, want the acknowledged record", recs)
	}
}

// Fault 6 of issue 9 in a cluster: the leader's fsync fails under
// flush.messages=1; the write is not acknowledged, the broker reports its
// log directory offline, and once its owner closes it (as the daemon
// does) another replica leads and serves every acknowledged record, and
// the refused one is never read.
func TestFsyncFailureMovesLeadership(t *testing.T) {
	c := startInProcCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.client(kgo.DisableIdempotentWrite())
	c.createAssigned(ctx, cl, "durable", [][]int32{{1, 2, 3}})
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "flush.messages", Value: kadm.StringPtr("1")}}, "durable"); err != nil {
		t.Fatal(err)
	}
	leader := metadataLeader(ctx, t, cl, "durable")
	lb := c.broker(leader)
	only, err := kgo.NewClient(kgo.SeedBrokers(lb.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if code := rawProduce(ctx, t, only, "durable", 0, "acked"); code != 0 {
		t.Fatalf("produce before the failure: %v", kerr.ErrorForCode(code))
	}
	undo := log.InjectSyncFailure(lb.cfg.LogDirs, errInjectedEIO)
	defer undo()
	if code := rawProduce(ctx, t, only, "durable", 0, "refused"); code != kerr.KafkaStorageError.Code {
		t.Fatalf("acks=all produce whose fsync failed on the leader: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	select {
	case <-lb.Failed():
	case <-ctx.Done():
		t.Fatal("the leader did not report its log directory offline")
	}
	// What the daemon does on Failed.
	c.mu.Lock()
	delete(c.bs, leader)
	c.mu.Unlock()
	if err := lb.Close(); !errors.Is(err, log.ErrStorage) {
		t.Errorf("close of the failed broker: %v, want the storage error", err)
	}
	undo()
	var next int32
	survivors := c.client()
	c.waitFor("another replica leads", func() bool {
		next = metadataLeader(ctx, t, survivors, "durable")
		return next > 0 && next != leader
	})
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"durable": {0: kgo.NewOffset().AtStart()}}))
	if err := cons.ProduceSync(ctx, &kgo.Record{Topic: "durable", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("acks=all produce to the new leader %d: %v", next, err)
	}
	var got []string
	for len(got) < 2 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %q before the deadline", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 2 || got[0] != "acked" || got[1] != "after" {
		t.Fatalf("new leader %d serves %q, want [acked after]: the refused record must never be read", next, got)
	}
}

// metadataLeader is the leader of topic/0 that Metadata reports, -1 if none.
func metadataLeader(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int32 {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return -1
	}
	p, ok := md.Topics[topic].Partitions[0]
	if !ok || p.Err != nil {
		return -1
	}
	return p.Leader
}

// With flush.messages=1 a produce request writes all its partitions and
// then waits for their fsyncs together (log.Syncer); whatever acks says,
// no partition is acknowledged before its fsync. Here one request with
// acks=1 carries six partitions and the fsync of one fails: that one
// answers KAFKA_STORAGE_ERROR, and after a restart it holds nothing.
func TestDurableProduceAcksOneWaitsForEveryPartitionsFsync(t *testing.T) {
	b := testBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := testClient(t, b, kgo.DisableIdempotentWrite())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, 1, map[string]*string{"flush.messages": kadm.StringPtr("1")}, "durable"); err != nil {
		t.Fatal(err)
	}
	produceAll := func(value string) []kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "durable"
		for p := range int32(6) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, oneRecordBatch(value)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		return resp.Topics[0].Partitions
	}
	for _, sp := range produceAll("synced") {
		if sp.ErrorCode != 0 || sp.BaseOffset != 0 {
			t.Fatalf("partition %d before the failure: %v at %d", sp.Partition, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
	}
	undo := log.InjectSyncFailure(filepath.Join(b.cfg.LogDirs, "durable-3"), errInjectedEIO)
	defer undo()
	for _, sp := range produceAll("lost") {
		if sp.Partition == 3 && sp.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("acks=1 produce whose fsync failed: %v at %d, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
	}
	undo()
	b.Close()
	b2 := startBroker(t, b.cfg)
	ends, err := kadm.NewClient(testClient(t, b2)).ListEndOffsets(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup("durable", 3); end.Offset != 1 {
		t.Fatalf("after restart partition 3 ends at %d, want 1: the refused record came back", end.Offset)
	}
}

// oneRecordBatch is a RecordBatch v2 of one record with value.
func oneRecordBatch(value string) []byte {
	rec := kmsg.Record{Value: []byte(value)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1,
		FirstTimestamp: now, MaxTimestamp: now, Records: rec.AppendTo(nil)}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
