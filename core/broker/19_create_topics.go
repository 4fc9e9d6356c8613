package broker

// CreateTopics v0-v7. v1 adds validate-only and error messages; v4 lets
// partitions and replication factor default (-1, KIP-464); v5 returns the
// created topic's partitions, replication factor and configs and is
// flexible; v7 returns the topic ID.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

func handleCreateTopics(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		code, msg := b.createOneTopic(ctx, r, rt, seen[rt.Topic] > 1, &st)
		st.ErrorCode = code
		if code != 0 && r.Version >= 1 {
			st.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

func (b *Broker) createOneTopic(ctx context.Context, r *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic, dup bool, st *kmsg.CreateTopicsResponseTopic) (errorCode, string) {
	if dup {
		return kerr.InvalidRequest.Code, fmt.Sprintf("topic %q appears more than once in the request", rt.Topic)
	}
	partitions, rf := rt.NumPartitions, rt.ReplicationFactor
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 || rf != -1 {
			return kerr.InvalidRequest.Code, "both a replica assignment and a partition count or replication factor were given"
		}
		partitions, rf = int32(len(rt.ReplicaAssignment)), int16(len(rt.ReplicaAssignment[0].Replicas))
	}
	var assignment [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) {
				return kerr.InvalidReplicaAssignment.Code, "partitions in an assignment must be numbered 0..n-1 in order"
			}
			assignment = append(assignment, a.Replicas)
		}
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return kerr.InvalidConfig.Code, fmt.Sprintf("config %q has a null value", c.Name)
		}
		configs[c.Name] = *c.Value
	}
	t, code, msg := b.createTopicWith(ctx, rt.Topic, partitions, rf, assignment, configs, r.ValidateOnly)
	if code != 0 {
		return code, msg
	}
	st.TopicID = t.id
	st.NumPartitions = int32(len(t.partitions))
	st.ReplicationFactor = 1
	if len(t.replicas) > 0 {
		st.ReplicationFactor = int16(len(t.replicas[0]))
	}
	for _, e := range b.topicConfigEntries(t.overrides) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.Source, c.ReadOnly = e.name, kmsg.StringPtr(e.value), int8(e.source), e.readOnly
		st.Configs = append(st.Configs, c)
	}
	return 0, ""
}
