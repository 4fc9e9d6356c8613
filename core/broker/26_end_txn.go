package broker

// EndTxn v0-v4 commits or aborts a producer's transaction (issue 11): the
// coordinator persists PrepareCommit/PrepareAbort, writes a marker to every
// partition of the transaction (retrying across leader changes) and
// persists CompleteCommit/CompleteAbort before answering. A retry of an
// EndTxn already completed the same way succeeds; the other way is
// INVALID_TXN_STATE. v5 (KIP-890 part 2, an epoch bump per transaction) is
// not served yet.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

func handleEndTxn(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = b.txns.end(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
	return reply(resp)
}
