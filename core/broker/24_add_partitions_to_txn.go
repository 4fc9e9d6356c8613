package broker

// AddPartitionsToTxn v0-v4 adds partitions to a producer's ongoing
// transaction (issue 11). Version notes: v1 is v0; v2 and v3 (flexible)
// change only throttling behaviour. v4 (KIP-890) is the batched
// broker-to-broker form, authorized by CLUSTER_ACTION: several
// transactions per request, each either added (VerifyOnly false) or only
// checked (VerifyOnly true: a partition leader asking whether a
// transactional batch belongs to an ongoing transaction with its
// partition, txn_verify.go). v5 only adds TRANSACTION_ABORTABLE and is
// not served.
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
	if r.Version >= 4 {
		for _, rt := range r.Transactions {
			resp.Transactions = append(resp.Transactions, addPartitionsBatched(b, ctx, rt))
		}
		return reply(resp)
	}
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

// addPartitionsBatched answers one transaction of a v4+ request.
func addPartitionsBatched(b *Broker, ctx context.Context, rt kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var parts []txn.TP
	unknown := false
	for _, t := range rt.Topics {
		bt := b.topic(t.Topic)
		for _, p := range t.Partitions {
			parts = append(parts, txn.TP{Topic: t.Topic, Partition: p})
			unknown = unknown || bt == nil || bt.partition(p) == nil
		}
	}
	codes := make([]int16, len(parts))
	switch {
	case rt.VerifyOnly:
		codes = b.txns.verifyOnly(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts)
	case unknown:
		for i, tp := range parts {
			codes[i] = kerr.OperationNotAttempted.Code
			if bt := b.topic(tp.Topic); bt == nil || bt.partition(tp.Partition) == nil {
				codes[i] = kerr.UnknownTopicOrPartition.Code
			}
		}
	default:
		code := b.txns.add(ctx, rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts)
		for i := range codes {
			codes[i] = code
		}
	}
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = rt.TransactionalID
	i := 0
	for _, t := range rt.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[i]
			i++
			st.Partitions = append(st.Partitions, sp)
		}
		out.Topics = append(out.Topics, st)
	}
	return out
}
