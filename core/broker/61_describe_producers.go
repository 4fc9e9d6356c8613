package broker

// DescribeProducers v0 lists the producers a partition keeps state for
// (KIP-664), from the leader's log: producer ID and epoch, the last
// sequence, and the first offset of the producer's open transaction (-1
// if none). LastTimestamp and CoordinatorEpoch are not tracked and are
// answered -1. Per partition: UNKNOWN_TOPIC_OR_PARTITION, or
// NOT_LEADER_OR_FOLLOWER off the leader.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

func handleDescribeProducers(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeProducersRequest)
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t := b.topic(rt.Topic)
		for _, i := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = i
			var p *partition
			if t != nil {
				p = t.partition(i)
			}
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !p.IsLeader():
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				for _, pi := range p.log.Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ID, int32(pi.Epoch), pi.LastSequence
					ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1, pi.TxnStart
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
