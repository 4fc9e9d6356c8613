package replica

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKgoClient checks the franz-go FetchClient against kfake: Fetch goes
// out pinned at v12 with the replica fields, and the other two requests
// reach the seed broker.
func TestKgoClient(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	fc, err := KgoDialer("replica-test")(BrokerAddr{ID: 0, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	ft := &fetcher{cfg: Config{ReplicaID: -1, BrokerEpoch: -1}.normalized()}
	req, _ := ft.request([]*followed{{p: &fixedPart{}, topic: "t", partition: 0}})
	resp, err := fc.Fetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != fetchVersion {
		t.Fatalf("Fetch went out as v%d, want v%d", resp.Version, fetchVersion)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response topics %+v", resp.Topics)
	}
	rp := resp.Topics[0].Partitions[0]
	if rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 || rp.HighWatermark != 1 {
		t.Fatalf("partition answer: error %d, %d bytes, HW %d", rp.ErrorCode, len(rp.RecordBatches), rp.HighWatermark)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr, err := fc.ListOffsets(ctx, lo)
	if err != nil || len(lr.Topics) != 1 || lr.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("ListOffsets: %+v %v", lr, err)
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.CurrentLeaderEpoch, op.LeaderEpoch = -1, 0
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	or, err := fc.OffsetForLeaderEpoch(ctx, oe)
	if err != nil || len(or.Topics) != 1 || len(or.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetForLeaderEpoch: %+v %v", or, err)
	}
}

// fixedPart is a FollowerPartition at offset 0 with no epochs.
type fixedPart struct{}

func (fixedPart) TopicPartition() (string, int32)          { return "t", 0 }
func (fixedPart) FetchState() (int64, int32, int32)        { return 0, -1, -1 }
func (fixedPart) EndOffsetForEpoch(int32) (int32, int64)   { return -1, -1 }
func (fixedPart) AppendFetched([]byte, int64, int64) error { return nil }
func (fixedPart) TruncateTo(int64) error                   { return nil }
func (fixedPart) TruncateFullyAndStartAt(int64) error      { return nil }
