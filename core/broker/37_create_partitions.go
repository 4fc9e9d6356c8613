package broker

// CreatePartitions v0-v3. v1 is the same as v0 (throttle behaviour), v2 is
// flexible, v3 the same as v2.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/wire"
)

func handleCreatePartitions(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.CreatePartitionsRequest)
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		code, msg := b.createPartitions(ctx, rt, seen[rt.Topic] > 1, r.ValidateOnly)
		st.ErrorCode = code
		if code != 0 {
			st.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}

func (b *Broker) createPartitions(ctx context.Context, rt kmsg.CreatePartitionsRequestTopic, dup, validateOnly bool) (errorCode, string) {
	if dup {
		return kerr.InvalidRequest.Code, fmt.Sprintf("topic %q appears more than once in the request", rt.Topic)
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := b.topic(rt.Topic)
	if t == nil {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", rt.Topic)
	}
	have := int32(len(t.partitions))
	if rt.Count <= have {
		return kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q has %d partitions; the new count must be larger, not %d", rt.Topic, have, rt.Count)
	}
	var assignment [][]int32
	for _, a := range rt.Assignment {
		assignment = append(assignment, a.Replicas)
	}
	if code, msg, ok := b.storeUnreachable(); ok {
		return code, msg
	}
	ct, err := b.cl.node.CreatePartitions(ctx, rt.Topic, rt.Count, assignment, validateOnly)
	if err != nil {
		return clusterErrorCode(err), err.Error()
	}
	if validateOnly {
		return 0, ""
	}
	rec := cluster.TopicRecord{ID: ct.ID, Partitions: ct.Partitions, Configs: ct.Configs, Replicas: ct.Replicas}
	nt, err := b.openTopic(rt.Topic, rec, ct.Version, t)
	if err != nil {
		return errKafkaStorage, err.Error()
	}
	b.meta.Store(b.meta.Load().with(nt))
	b.logger.Info("broker: added partitions", "topic", rt.Topic, "from", have, "to", rt.Count)
	// Wait (with metaMu released) until the new partitions have their
	// states here, so they are served when CreatePartitions answers.
	b.metaMu.Unlock()
	b.waitPartitionStates(ctx, nt.partitions[have:])
	b.metaMu.Lock()
	return 0, ""
}
