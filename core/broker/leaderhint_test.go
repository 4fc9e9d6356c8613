package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// TestNotLeaderCarriesLeaderHint: KIP-951. Produce v10+ and Fetch v16+
// sent to a follower are answered NOT_LEADER_OR_FOLLOWER with the current
// leader, its epoch and its endpoint.
func TestNotLeaderCarriesLeaderHint(t *testing.T) {
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	cl := c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	const topic = "hint"
	c.createAssigned(ctx, cl, topic, [][]int32{{1, 2, 3}})
	leader := c.broker(1)
	epoch := leader.topic(topic).partition(0).LeaderEpoch()
	host, port := leader.advertised()

	preq := kmsg.NewPtrProduceRequest()
	preq.Version, preq.TimeoutMillis = 11, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte("v"), Timestamp: 1000})
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp, err := preq.RequestWith(ctx, cl.Broker(2))
	if err != nil {
		t.Fatal(err)
	}
	sp := presp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp.CurrentLeader.LeaderID != 1 || sp.CurrentLeader.LeaderEpoch != epoch {
		t.Errorf("produce CurrentLeader %+v, want leader 1 epoch %d", sp.CurrentLeader, epoch)
	}
	if len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != 1 || presp.Brokers[0].Host != host || presp.Brokers[0].Port != port {
		t.Errorf("produce NodeEndpoints %+v, want node 1 at %s:%d", presp.Brokers, host, port)
	}

	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.MaxBytes, freq.ReplicaID, freq.SessionEpoch = 16, 1<<20, -1, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = leader.topic(topic).id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl.Broker(3))
	if err != nil {
		t.Fatal(err)
	}
	fsp := fresp.Topics[0].Partitions[0]
	if fsp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch from a follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(fsp.ErrorCode))
	}
	if fsp.CurrentLeader.LeaderID != 1 || fsp.CurrentLeader.LeaderEpoch != epoch {
		t.Errorf("fetch CurrentLeader %+v, want leader 1 epoch %d", fsp.CurrentLeader, epoch)
	}
	if len(fresp.Brokers) != 1 || fresp.Brokers[0].NodeID != 1 || fresp.Brokers[0].Host != host || fresp.Brokers[0].Port != port {
		t.Errorf("fetch NodeEndpoints %+v, want node 1 at %s:%d", fresp.Brokers, host, port)
	}

	// The leader itself answers without hints.
	presp, err = preq.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if sp := presp.Topics[0].Partitions[0]; sp.ErrorCode != 0 || sp.CurrentLeader.LeaderID != -1 || len(presp.Brokers) != 0 {
		t.Errorf("produce to the leader: %v, CurrentLeader %+v, NodeEndpoints %+v", kerr.ErrorForCode(sp.ErrorCode), sp.CurrentLeader, presp.Brokers)
	}
}
