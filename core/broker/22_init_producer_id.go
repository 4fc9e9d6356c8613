package broker

// InitProducerId v0-v5 gives an idempotent producer its producer ID.
//
// Version notes: v1 is v0 (throttle behaviour only); v2 is flexible
// (KIP-482); v3 adds the current ProducerID and ProducerEpoch (KIP-360) so
// a producer can ask for its epoch to be bumped; v4 and v5 add nothing a
// non-transactional producer sees.
//
// Served without a transaction coordinator:
//
//   - A null TransactionalID gets a fresh producer ID with epoch 0. Kafka
//     does the same, ignoring ProducerID/ProducerEpoch for a producer
//     without a transactional ID: a KIP-360 "bump" of an idempotent
//     producer is answered with a new ID, which the client accepts.
//   - An empty TransactionalID, or only one of ProducerID and ProducerEpoch
//     set, is INVALID_REQUEST, as in Kafka.
//   - Any other TransactionalID goes to the transaction coordinator
//     (txn_ops.go, core/txn): the ID keeps its producer ID and gets the
//     next epoch, fencing the previous instance; an open transaction of
//     that instance is aborted first. NOT_COORDINATOR when this broker
//     does not lead the ID's __transaction_state partition,
//     CONCURRENT_TRANSACTIONS while its markers are written,
//     INVALID_TRANSACTION_TIMEOUT above transaction.max.timeout.ms.
//   - A new producer ID that needs a new block from the metadata store
//     while the store is unreachable (or does not answer in time) is the
//     retriable COORDINATOR_LOAD_IN_PROGRESS, as a Kafka broker answers
//     while waiting for its controller's next block (storewrite.go); an
//     ID of the broker's current block needs no store and is handed out.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

func handleInitProducerID(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	switch {
	case (r.ProducerID == -1) != (r.ProducerEpoch == -1):
		// KIP-360: both set or both unset (v0-v2 decode them as -1).
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	case r.TransactionalID != nil && *r.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	case r.TransactionalID != nil:
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = b.txns.initProducer(ctx, *r.TransactionalID, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch)
		return reply(resp)
	}
	id, err := b.allocateProducerID(ctx)
	if err != nil {
		b.logger.Warn("broker: init producer id", "err", err)
		resp.ErrorCode = producerIDErrorCode(err)
		return reply(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return reply(resp)
}
