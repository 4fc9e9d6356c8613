package broker

// Metadata v0-v12. v1 makes a null topic list mean "all topics" (v0 uses
// an empty list) and adds the controller; v2 the cluster ID; v4 lets the
// client decline auto-creation; v7 leader epochs; v8 authorized
// operations; v9 flexible; v10 topic IDs; v12 topics requested by ID only.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/wire"
)

// authorizedOpsUnset is what Kafka returns when authorized operations were
// not requested.
const authorizedOpsUnset = -2147483648

func handleMetadata(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	for _, bi := range b.liveBrokers() {
		host, port, ok := endpointFor(bi, req.Conn)
		if !ok {
			continue // no listener of this name there: Kafka leaves it out
		}
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = bi.ID, host, port
		if bi.Rack != "" {
			broker.Rack = kmsg.StringPtr(bi.Rack)
		}
		resp.Brokers = append(resp.Brokers, broker)
	}
	resp.ClusterID = &b.clusterID
	resp.ControllerID = b.controllerID()
	resp.AuthorizedOperations = authorizedOpsUnset

	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		snap := b.meta.Load()
		for _, name := range snap.names() {
			resp.Topics = append(resp.Topics, b.metadataTopic(snap.byName[name], name))
		}
		return reply(resp)
	}
	autoCreate := b.cfg.AutoCreateTopicsEnable && (r.Version < 4 || r.AllowAutoTopicCreation)
	for _, rt := range r.Topics {
		var t *topic
		switch {
		case rt.Topic != nil:
			t = b.topic(*rt.Topic)
			if t == nil && *rt.Topic == offsetsTopic {
				// The internal topic is created by the group coordinator,
				// with its own partition count and compaction.
				b.coordinatorReady(ctx)
				t = b.topic(offsetsTopic)
			}
			if t == nil && autoCreate {
				var code errorCode
				t, code, _ = b.createTopic(ctx, *rt.Topic, -1, -1, nil, false)
				if code != 0 && code != errTopicAlreadyExists {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic, mt.ErrorCode = rt.Topic, code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				t = b.topic(*rt.Topic)
			}
		default:
			t = b.topicByID(rt.TopicID)
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			} else if checkTopicName(*rt.Topic) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			mt.AuthorizedOperations = authorizedOpsUnset
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t, t.name))
	}
	return reply(resp)
}

func (b *Broker) metadataTopic(t *topic, name string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(name)
	mt.TopicID = t.id
	mt.IsInternal = name == offsetsTopic
	mt.AuthorizedOperations = authorizedOpsUnset
	for _, p := range t.partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.index
		st := p.State()
		v := st.View
		if v.Leader == b.cfg.NodeID && st.Role != part.Leader {
			// Named leader but not leading: fenced (its store session
			// lapsed or ended; the controller may have moved the
			// partition already). Claiming it would send clients here
			// for a leadership this broker does not hold.
			v.Leader = -1
		}
		mp.Leader, mp.LeaderEpoch = v.Leader, v.LeaderEpoch
		mp.Replicas, mp.ISR = v.Replicas, v.ISR
		if mp.Replicas == nil {
			mp.Replicas = []int32{}
		}
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		for _, id := range v.Replicas {
			if _, ok := b.brokerInfo(id); !ok {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		if v.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
