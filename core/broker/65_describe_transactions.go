package broker

// DescribeTransactions v0 describes transactional IDs from their
// coordinator (KIP-664): state (Kafka's names), producer ID and epoch,
// timeout, start time and the partitions of the ongoing transaction. Per
// ID: NOT_COORDINATOR off its coordinator, COORDINATOR_LOAD_IN_PROGRESS
// while it loads, TRANSACTIONAL_ID_NOT_FOUND for an unknown ID.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/txn"
	"github.com/vltava/vltava/core/wire"
)

func handleDescribeTransactions(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	h := b.txns
	for _, id := range r.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		h.mu.Lock()
		var t *txn.Txn
		code := kerr.NotCoordinator.Code
		if b.topic(txnStateTopic) != nil {
			_, code = h.coordinatorLocked(id)
			t = h.txns[id]
		}
		h.mu.Unlock()
		switch {
		case code != 0:
			ts.ErrorCode = code
		case t == nil:
			ts.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			ts.State, ts.TimeoutMillis, ts.StartTimestamp = t.Status.String(), t.TimeoutMs, -1
			if t.Status == txn.Ongoing || t.Status.Preparing() {
				ts.StartTimestamp = t.StartMs
			}
			ts.ProducerID, ts.ProducerEpoch = t.ProducerID, t.Epoch
			for _, tp := range t.Partitions {
				if n := len(ts.Topics); n > 0 && ts.Topics[n-1].Topic == tp.Topic {
					ts.Topics[n-1].Partitions = append(ts.Topics[n-1].Partitions, tp.Partition)
					continue
				}
				tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
				ts.Topics = append(ts.Topics, tt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return reply(resp)
}
