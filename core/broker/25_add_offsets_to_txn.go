package broker

// AddOffsetsToTxn v0-v3 adds a group's __consumer_offsets partition to a
// producer's ongoing transaction, so its TxnOffsetCommit is committed or
// aborted with the transaction (issue 11). Errors as AddPartitionsToTxn.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/txn"
	"github.com/vltava/vltava/core/wire"
)

func handleAddOffsetsToTxn(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if r.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return reply(resp)
	}
	if code := b.coordinatorReady(ctx); code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	t := b.topic(offsetsTopic)
	if t == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply(resp)
	}
	tp := txn.TP{Topic: offsetsTopic, Partition: group.PartitionFor(r.Group, int32(len(t.partitions)))}
	resp.ErrorCode = b.txns.add(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, []txn.TP{tp})
	return reply(resp)
}
