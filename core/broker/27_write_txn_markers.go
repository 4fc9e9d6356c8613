package broker

// WriteTxnMarkers v0-v1 is the transaction coordinator asking a partition
// leader to write markers (issue 11). Each partition is answered on its
// own: NOT_LEADER_OR_FOLLOWER where this broker does not lead (the
// coordinator retries with the new leader), UNKNOWN_TOPIC_OR_PARTITION
// for a partition that no longer exists (nothing to mark),
// TRANSACTION_COORDINATOR_FENCED for a marker whose coordinator epoch is
// older than that of the producer's last marker here. Markers for
// __consumer_offsets also end the transaction's pending offsets.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/txn"
	"github.com/vltava/vltava/core/wire"
)

func handleWriteTxnMarkers(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, rt := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				sp.ErrorCode = b.writeMarker(txn.TP{Topic: rt.Topic, Partition: p}, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch)
				st.Partitions = append(st.Partitions, sp)
			}
			rm.Topics = append(rm.Topics, st)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return reply(resp)
}
