package broker

// ListPartitionReassignments v0 (KIP-455): the reassignments in progress,
// for the named partitions or (Topics null) all of them, with the full
// replica list and the replicas being added and removed. Partitions not
// being reassigned are left out.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

func handleListPartitionReassignments(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	want := map[string]map[int32]bool{}
	for _, rt := range r.Topics {
		want[rt.Topic] = map[int32]bool{}
		for _, p := range rt.Partitions {
			want[rt.Topic][p] = true
		}
	}
	var cur *kmsg.ListPartitionReassignmentsResponseTopic
	for _, ra := range b.cl.node.Reassignments() { // sorted by topic, partition
		if r.Topics != nil && !want[ra.Topic][ra.Partition] {
			continue
		}
		if cur == nil || cur.Topic != ra.Topic {
			resp.Topics = append(resp.Topics, kmsg.NewListPartitionReassignmentsResponseTopic())
			cur = &resp.Topics[len(resp.Topics)-1]
			cur.Topic = ra.Topic
		}
		p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas = ra.Partition, ra.Replicas, ra.Adding, ra.Removing
		if p.AddingReplicas == nil {
			p.AddingReplicas = []int32{}
		}
		if p.RemovingReplicas == nil {
			p.RemovingReplicas = []int32{}
		}
		cur.Partitions = append(cur.Partitions, p)
	}
	return reply(resp)
}
