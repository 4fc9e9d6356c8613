package broker

// OffsetForLeaderEpoch v0-v4 (KIP-101, KIP-279, KIP-320): for each
// partition, the end offset of the requested leader epoch on this
// leader's log, which a follower (or a consumer checking for truncation)
// uses to find where its log diverged.
//
// Version notes: v1 answers the epoch found (the largest <= requested);
// v2 adds CurrentLeaderEpoch (fenced as in Fetch); v3 adds ReplicaID; v4
// is flexible.
//
// Per partition: unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION;
// a partition this broker does not lead is NOT_LEADER_OR_FOLLOWER (a
// follower answers only debug requests, ReplicaID -2, as in Kafka); a
// stale or future CurrentLeaderEpoch is FENCED_LEADER_EPOCH or
// UNKNOWN_LEADER_EPOCH. An epoch the log does not know answers
// LeaderEpoch -1 and EndOffset -1 (UNDEFINED), without error.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

func handleOffsetForLeaderEpoch(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	snap := b.meta.Load()
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt, st := &r.Topics[i], &resp.Topics[i]
		st.Topic = rt.Topic
		t := snap.byName[rt.Topic]
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, sp := &rt.Partitions[j], &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			var p *partition
			if t != nil {
				p = t.partition(rp.Partition)
			}
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !p.IsLeader() && !(r.Version >= 3 && r.ReplicaID == -2):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case r.Version >= 2 && checkLeaderEpoch(p.LeaderEpoch(), rp.CurrentLeaderEpoch) != 0:
				sp.ErrorCode = checkLeaderEpoch(p.LeaderEpoch(), rp.CurrentLeaderEpoch)
			default:
				sp.LeaderEpoch, sp.EndOffset = p.log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
		}
	}
	return reply(resp)
}
