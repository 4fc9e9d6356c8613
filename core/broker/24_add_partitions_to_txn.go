package broker

// AddPartitionsToTxn v0-v3 adds partitions to a producer's ongoing
// transaction (issue 11). Version notes: v1 is v0; v2 and v3 (flexible)
// change only throttling behaviour. v4's batched broker-to-broker form
// (KIP-890 verification) is not served: the produce path verifies in
// process (00_produce.go).
//
// Partitions of unknown topics are UNKNOWN_TOPIC_OR_PARTITION and the
// others of the request OPERATION_NOT_ATTEMPTED, as in Kafka; otherwise
// every partition carries the coordinator's answer (txn_ops.go):
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/txn"
	"github.com/vltava/vltava/core/wire"
)

func handleAddPartitionsToTxn(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []txn.TP
	unknown := map[txn.TP]bool{}
	for _, rt := range r.Topics {
		t := b.topic(rt.Topic)
		for _, p := range rt.Partitions {
			tp := txn.TP{Topic: rt.Topic, Partition: p}
			if t == nil || t.partition(p) == nil {
				unknown[tp] = true
			}
			parts = append(parts, tp)
		}
	}
	code := int16(0)
	if len(unknown) == 0 {
		code = b.txns.add(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, parts)
	}
	for _, rt := range r.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			if len(unknown) > 0 {
				sp.ErrorCode = kerr.OperationNotAttempted.Code
				if unknown[txn.TP{Topic: rt.Topic, Partition: p}] {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
