package broker

// ElectLeaders v0-v2 (KIP-183, KIP-460): run a preferred (ElectionType 0)
// or unclean (1) leader election for the named partitions, or for every
// partition when Topics is null. The election is a compare-and-set of
// each partition's state through core/cluster; the new leader takes over
// when the state reaches it.
//
// Version notes: v1 adds ElectionType and a top-level ErrorCode; v2 is
// flexible. v0 is always preferred.
//
// Per partition: ELECTION_NOT_NEEDED when the preferred replica already
// leads (or an unclean election finds a leader), PREFERRED_LEADER_NOT_
// AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION.
// With a null Topics, partitions that needed nothing are left out, as in
// Kafka. On a single node every partition is already led by its only
// (preferred) replica: ELECTION_NOT_NEEDED.

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/core/wire"
)

func handleElectLeaders(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ElectLeadersRequest)
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	preferred := r.Version == 0 || r.ElectionType == 0
	if r.ElectionType != 0 && r.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	var parts []cluster.TopicPartition
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			parts = append(parts, cluster.TopicPartition{Topic: rt.Topic, Partition: p})
		}
	}
	all := r.Topics == nil
	if code, msg, ok := b.storeUnreachable(); ok {
		resp.ErrorCode = code
		b.logger.Info("broker: ElectLeaders refused", "reason", msg)
		return reply(resp)
	}
	results := map[cluster.TopicPartition]error{}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(max(r.TimeoutMillis, 1000))*time.Millisecond)
	results = b.cl.node.ElectLeaders(cctx, preferred, parts...)
	cancel()
	byTopic := map[string]*kmsg.ElectLeadersResponseTopic{}
	var names []string
	for tp, err := range results {
		code := int16(0)
		if err != nil {
			code = clusterErrorCode(err)
		}
		if all && errors.Is(err, kerr.ElectionNotNeeded) {
			continue
		}
		rt := byTopic[tp.Topic]
		if rt == nil {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = tp.Topic
			rt = &t
			byTopic[tp.Topic] = rt
			names = append(names, tp.Topic)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = tp.Partition, code
		if err != nil {
			rp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	sort.Strings(names)
	for _, n := range names {
		rt := byTopic[n]
		sort.Slice(rt.Partitions, func(i, j int) bool { return rt.Partitions[i].Partition < rt.Partitions[j].Partition })
		resp.Topics = append(resp.Topics, *rt)
	}
	return reply(resp)
}
