package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// listOffset asks for one partition's offset at ts and fails the test on
// an error code.
func listOffset(t *testing.T, cl *kgo.Client, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	sp := listOffsetRaw(t, cl, topic, partition, ts)
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		t.Fatalf("list offsets %s-%d at %d: %v", topic, partition, ts, err)
	}
	return sp
}

func listOffsetRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ListOffsetsResponse](t, cl, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets: %d topics in answer", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

func TestListOffsets(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "lo", 1, nil)

	// Empty partition.
	for _, ts := range []int64{-2, -1, -4} {
		if got := listOffset(t, cl, "lo", 0, ts).Offset; got != 0 {
			t.Errorf("empty: timestamp %d: offset %d, want 0", ts, got)
		}
	}
	if got := listOffset(t, cl, "lo", 0, -3); got.Offset != -1 || got.Timestamp != -1 {
		t.Errorf("empty: max timestamp: offset %d ts %d, want -1 -1", got.Offset, got.Timestamp)
	}

	// Offsets 0-2 at times 1000, 3000 (the maximum), 2000; one batch each.
	for _, ts := range []int64{1000, 3000, 2000} {
		produceOne(t, cl, "lo", recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("v"), Timestamp: ts}))
	}
	for _, c := range []struct {
		ts             int64
		offset, tsWant int64
	}{
		{-2, 0, -1},
		{-4, 0, -1},
		{-1, 3, -1},
		{-3, 1, 3000},
		{0, 0, 1000},
		{1000, 0, 1000},
		{1001, 1, 3000},
		{2500, 1, 3000},
		{3001, -1, -1}, // nothing at or after: -1, -1 as in Kafka
	} {
		got := listOffset(t, cl, "lo", 0, c.ts)
		if got.Offset != c.offset || got.Timestamp != c.tsWant {
			t.Errorf("timestamp %d: offset %d ts %d, want %d %d", c.ts, got.Offset, got.Timestamp, c.offset, c.tsWant)
		}
	}

	for _, c := range []struct {
		topic     string
		partition int32
		ts        int64
		want      *kerr.Error
	}{
		{"nope", 0, -1, kerr.UnknownTopicOrPartition},
		{"lo", 9, -1, kerr.UnknownTopicOrPartition},
		{"lo", 0, -7, kerr.UnsupportedVersion},
	} {
		if sp := listOffsetRaw(t, cl, c.topic, c.partition, c.ts); sp.ErrorCode != c.want.Code {
			t.Errorf("%s-%d at %d: %v, want %v", c.topic, c.partition, c.ts, kerr.ErrorForCode(sp.ErrorCode), c.want)
		}
	}
}

func TestListOffsetsDuplicatePartition(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "dup", 1, nil)
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "dup"
	for range 2 {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ListOffsetsResponse](t, cl, req)
	for _, sp := range resp.Topics[0].Partitions {
		if sp.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("duplicate partition: %v, want INVALID_REQUEST", kerr.ErrorForCode(sp.ErrorCode))
		}
	}
}
