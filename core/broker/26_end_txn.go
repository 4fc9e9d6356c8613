package broker

// EndTxn v0-v5 commits or aborts a producer's transaction (issue 11): the
// coordinator persists PrepareCommit/PrepareAbort, writes a marker to every
// partition of the transaction (retrying across leader changes) and
// persists CompleteCommit/CompleteAbort before answering. A retry of an
// EndTxn already completed the same way succeeds; the other way is
// INVALID_TXN_STATE. v5 (KIP-890 part 2) bumps the producer epoch at every
// end and answers with the producer ID and epoch to continue with (a new
// producer ID at epoch 0 when the epoch would overflow); a retry names
// the epoch before the bump, and a delayed EndTxn of an earlier
// transaction is fenced by its stale epoch (core/txn End).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

func handleEndTxn(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	code, pid, epoch := b.txns.end(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, r.Version >= 5)
	resp.ErrorCode = code
	if code == 0 {
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
	}
	return reply(resp)
}
