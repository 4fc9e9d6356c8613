package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func deleteRecords(t *testing.T, cl *kgo.Client, topic string, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.DeleteRecordsResponse](t, cl, req)
	return resp.Topics[0].Partitions[0]
}

func TestDeleteRecords(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "dr", 1, nil)
	for range 5 {
		produceOne(t, cl, "dr", valueBatch("a", "b")) // offsets 0-9
	}

	if sp := deleteRecords(t, cl, "dr", 11); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the high watermark: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(sp.ErrorCode))
	}
	sp := deleteRecords(t, cl, "dr", 4)
	if sp.ErrorCode != 0 || sp.LowWatermark != 4 {
		t.Fatalf("delete before 4: %v, low watermark %d", kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
	}
	if got := listOffset(t, cl, "dr", 0, -2).Offset; got != 4 {
		t.Fatalf("earliest offset %d after delete, want 4", got)
	}
	// Below the new start is out of range; at it, records are there.
	fsp := fetchParts(t, request[*kmsg.FetchResponse](t, cl, newFetch(b, 0, 0, 1<<20, fetchTarget{topic: "dr", offset: 2, maxBytes: 1 << 20})))[0]
	if fsp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below log start: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(fsp.ErrorCode))
	}
	if got := values(t, fetchBatches(t, b, cl, "dr", 0, 4)[0]); len(got) != 2 {
		t.Fatalf("fetch at log start: %q", got)
	}
	// An offset below the start changes nothing; -1 means the high watermark.
	if sp := deleteRecords(t, cl, "dr", 1); sp.ErrorCode != 0 || sp.LowWatermark != 4 {
		t.Fatalf("delete before 1: %v, low watermark %d, want 4", kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
	}
	if sp := deleteRecords(t, cl, "dr", -1); sp.ErrorCode != 0 || sp.LowWatermark != 10 {
		t.Fatalf("delete all: %v, low watermark %d, want 10", kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
	}
	// The log keeps its end: new records continue at 10.
	if got := produceOne(t, cl, "dr", valueBatch("c")).BaseOffset; got != 10 {
		t.Fatalf("produce after deleting everything: base offset %d, want 10", got)
	}

	if sp := deleteRecords(t, cl, "nope", 0); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	compact := "compact"
	createTopic(t, cl, "compacted", 1, map[string]*string{"cleanup.policy": &compact})
	if sp := deleteRecords(t, cl, "compacted", 0); sp.ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("compacted topic: %v, want POLICY_VIOLATION", kerr.ErrorForCode(sp.ErrorCode))
	}
}
