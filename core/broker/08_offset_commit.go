package broker

// OffsetCommit v0-v9 stores a group's consumed offsets.
//
// Version notes: v1 adds the generation, member ID and a per-partition
// timestamp; v2-v4 a retention time instead (dropped in v5, KIP-211:
// offsets of a live group never expire); v6 the leader epoch (KIP-320);
// v7 group.instance.id; v8 is flexible; v9 takes KIP-848 member epochs in
// the generation field. v10 (topic IDs) is not served yet.
//
// Generation -1 with no member ID commits for a group without members (a
// "simple" consumer); otherwise the member and generation (or member
// epoch) must be current: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH.
//
// The response is sent only once the offset records are appended to
// __consumer_offsets (flushed per the topic's flush settings).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleOffsetCommit(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		return reply(group.FailReply(commitResponse(r), code))
	}
	w := newWaiter()
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.OffsetCommit(now, r, w) })
	return await(ctx, w)
}

// commitResponse is an OffsetCommit response that echoes every partition
// with no error, for FailReply to fill in.
func commitResponse(r *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
