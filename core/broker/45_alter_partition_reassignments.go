package broker

// AlterPartitionReassignments v0 (KIP-455): start (Replicas non-null) or
// cancel (null) moving partitions to new replica lists. core/cluster
// records the reassignment; the leader adds the new replicas, they catch
// up by fetching, and the controller switches to the target list and
// drops the old replicas once every target replica is in the ISR.
//
// Per partition: INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS
// (cancel without one), UNKNOWN_TOPIC_OR_PARTITION.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/wire"
)

func handleAlterPartitionReassignments(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	targets := map[cluster.TopicPartition][]int32{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			targets[cluster.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.Replicas
		}
	}
	if code, msg, ok := b.storeUnreachable(); ok {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return reply(resp)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(max(r.TimeoutMillis, 1000))*time.Millisecond)
	results := b.cl.node.AlterReassignments(cctx, targets)
	cancel()
	for _, rt := range r.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			if err := results[cluster.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; err != nil {
				sp.ErrorCode = clusterErrorCode(err)
				sp.ErrorMessage = kmsg.StringPtr(err.Error())
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
