package broker

// TxnOffsetCommit v0-v3 stores a transaction's consumed offsets with the
// group coordinator, pending until the transaction ends (core/group
// txn_offsets.go). Version notes: v2 adds the leader epoch; v3 (flexible)
// the generation, member and instance IDs for fencing (KIP-447).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleTxnOffsetCommit(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply(resp)
	}
	w := newWaiter()
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.TxnOffsetCommit(now, r, w) })
	return await(ctx, w)
}

// completeTxnOffsets ends producer pid's pending transactional offsets in
// __consumer_offsets partition i: committed offsets are written like an
// OffsetCommit's, aborted ones dropped.
func (b *Broker) completeTxnOffsets(pid int64, i int32, commit bool) {
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		return c.CompleteTxnOffsets(now, pid, i, commit)
	})
}
