package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/wire"
)

// The checks of authzTable that read more than one kind of resource, and
// the splits that take refused resources out of a request and answer
// them in its response.

// splitSlice returns the elements keep allows and those it refuses; it
// allocates only when it refuses one.
func splitSlice[T any](s []T, keep func(*T) bool) (kept, refused []T) {
	i := 0
	for ; i < len(s) && keep(&s[i]); i++ {
	}
	if i == len(s) {
		return s, nil
	}
	kept = append(make([]T, 0, len(s)), s[:i]...)
	for j := i; j < len(s); j++ {
		if keep(&s[j]) {
			kept = append(kept, s[j])
		} else {
			refused = append(refused, s[j])
		}
	}
	return kept, refused
}

// topicIDName resolves a topic ID; "" when no topic has it (the handler
// then answers UNKNOWN_TOPIC_ID).
func (b *Broker) topicIDName(id [16]byte) string {
	if t := b.meta.Load().byID[id]; t != nil {
		return t.name
	}
	return ""
}

func checkProduce(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.ProduceRequest)
	if r.TransactionID != nil && !b.allowed(w, rtTxnID, *r.TransactionID, opWrite) {
		return nil, splitProduce(r, func(string) bool { return false }, errTxnAuthz)
	}
	// The fast path: no closure, no allocation.
	all := true
	for i := range r.Topics {
		if !b.allowed(w, rtTopic, r.Topics[i].Topic, opWrite) {
			all = false
			break
		}
	}
	if all {
		return nil, nil
	}
	return nil, splitProduce(r, func(name string) bool { return b.allowed(w, rtTopic, name, opWrite) }, errTopicAuthz)
}

func splitProduce(r *kmsg.ProduceRequest, keep func(string) bool, code int16) func(kmsg.Response) {
	var refused []kmsg.ProduceRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.ProduceRequestTopic) bool { return keep(t.Topic) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.ProduceResponse)
		for _, t := range refused {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func (b *Broker) fetchTopicName(r *kmsg.FetchRequest, t *kmsg.FetchRequestTopic) (string, bool) {
	if r.Version >= 13 {
		n := b.topicIDName(t.TopicID)
		return n, n != ""
	}
	return t.Topic, true
}

func checkFetch(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.FetchRequest)
	if fetchReplicaID(r) >= 0 {
		// A follower: the broker's principal needs CLUSTER_ACTION.
		if b.clusterAllowed(w, opClusterAction) {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		splitFetch(r, func(*kmsg.FetchRequestTopic) bool { return false }, errTopicAuthz)(resp)
		return resp, nil
	}
	all := true
	for i := range r.Topics {
		if name, ok := b.fetchTopicName(r, &r.Topics[i]); ok && !b.allowed(w, rtTopic, name, opRead) {
			all = false
			break
		}
	}
	if all {
		return nil, nil
	}
	merge := splitFetch(r, func(t *kmsg.FetchRequestTopic) bool {
		name, ok := b.fetchTopicName(r, t)
		return !ok || b.allowed(w, rtTopic, name, opRead)
	}, errTopicAuthz)
	if len(r.Topics) == 0 {
		// Nothing left to read: answer now rather than long-poll nothing.
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		merge(resp)
		return resp, nil
	}
	return nil, merge
}

// splitFetch's refused partitions carry empty (non-nil) record batches:
// wire.FetchFrame encodes them as they are.
func splitFetch(r *kmsg.FetchRequest, keep func(*kmsg.FetchRequestTopic) bool, code int16) func(kmsg.Response) {
	var refused []kmsg.FetchRequestTopic
	r.Topics, refused = splitSlice(r.Topics, keep)
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.FetchResponse)
		for _, t := range refused {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rp.RecordBatches = []byte{}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func splitListOffsets(m kmsg.Request, keep func(string) bool, code int16) func(kmsg.Response) {
	r := m.(*kmsg.ListOffsetsRequest)
	var refused []kmsg.ListOffsetsRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.ListOffsetsRequestTopic) bool { return keep(t.Topic) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.ListOffsetsResponse)
		for _, t := range refused {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkMetadata(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.MetadataRequest)
	var merges []func(*kmsg.MetadataResponse)
	describe := func(name string) bool { return b.allowed(w, rtTopic, name, opDescribe) }
	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		// All topics: hide those the principal may not describe.
		merges = append(merges, func(resp *kmsg.MetadataResponse) {
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool {
				return t.Topic != nil && !describe(*t.Topic)
			})
		})
	} else if refused := b.metadataRefused(r, w, describe); refused != nil {
		merges = append(merges, func(resp *kmsg.MetadataResponse) {
			for _, t := range refused {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID, mt.ErrorCode = t.Topic, t.TopicID, errTopicAuthz
				mt.AuthorizedOperations = authorizedOpsUnset
				resp.Topics = append(resp.Topics, mt)
			}
		})
	}
	if r.Version >= 8 && r.IncludeTopicAuthorizedOperations {
		merges = append(merges, func(resp *kmsg.MetadataResponse) {
			for i := range resp.Topics {
				if t := &resp.Topics[i]; t.ErrorCode != errTopicAuthz && t.Topic != nil {
					t.AuthorizedOperations = b.authorizedOps(w, rtTopic, *t.Topic, topicOps)
				}
			}
		})
	}
	if r.Version >= 8 && r.Version <= 10 && r.IncludeClusterAuthorizedOperations {
		merges = append(merges, func(resp *kmsg.MetadataResponse) {
			resp.AuthorizedOperations = b.authorizedOps(w, rtCluster, acl.ClusterName, clusterOps)
		})
	}
	if merges == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		for _, f := range merges {
			f(m.(*kmsg.MetadataResponse))
		}
	}
}

// metadataRefused takes the requested topics the principal may not
// describe (or, to be auto-created, create) out of r.
func (b *Broker) metadataRefused(r *kmsg.MetadataRequest, w who, describe func(string) bool) []kmsg.MetadataRequestTopic {
	autoCreate := b.cfg.AutoCreateTopicsEnable && (r.Version < 4 || r.AllowAutoTopicCreation)
	mayCreate := func(name string) bool {
		return b.clusterAllowed(w, opCreate) || b.allowed(w, rtTopic, name, opCreate)
	}
	var refused []kmsg.MetadataRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.MetadataRequestTopic) bool {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if name = b.topicIDName(t.TopicID); name == "" {
			return true // unknown ID: the handler answers it
		}
		if !describe(name) {
			return false
		}
		return !autoCreate || b.topic(name) != nil || mayCreate(name)
	})
	return refused
}

// The operations Kafka reports as authorized operations, per resource
// type (KIP-430).
var (
	topicOps   = []acl.Operation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs}
	groupOps   = []acl.Operation{opRead, opDescribe, opDelete}
	clusterOps = []acl.Operation{opCreate, opAlter, opDescribe, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite}
)

// authorizedOps is KIP-430's bit field: bit i set when operation i is
// allowed on the resource.
func (b *Broker) authorizedOps(w who, rt acl.ResourceType, name string, ops []acl.Operation) int32 {
	var bits int32
	for _, op := range ops {
		if b.allowed(w, rt, name, op) {
			bits |= 1 << op
		}
	}
	return bits
}

func checkDescribeCluster(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	if !r.IncludeClusterAuthorizedOperations {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		m.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = b.authorizedOps(w, rtCluster, acl.ClusterName, clusterOps)
	}
}

func checkDescribeGroups(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DescribeGroupsRequest)
	merge := splitDescribeGroups(r, func(g string) bool { return b.allowed(w, rtGroup, g, opDescribe) }, errGroupAuthz)
	if r.Version < 3 || !r.IncludeAuthorizedOperations {
		return nil, merge
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.DescribeGroupsResponse)
		for i := range resp.Groups {
			if g := &resp.Groups[i]; g.ErrorCode != errGroupAuthz {
				g.AuthorizedOperations = b.authorizedOps(w, rtGroup, g.Group, groupOps)
			}
		}
		if merge != nil {
			merge(m)
		}
	}
}

func checkOffsetCommit(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetCommitRequest)
	keep, code := func(string) bool { return false }, errGroupAuthz
	if b.allowed(w, rtGroup, r.Group, opRead) {
		keep, code = func(name string) bool { return b.allowed(w, rtTopic, name, opRead) }, errTopicAuthz
	}
	var refused []kmsg.OffsetCommitRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.OffsetCommitRequestTopic) bool { return keep(t.Topic) })
	if refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.OffsetCommitResponse)
		for _, t := range refused {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkOffsetFetch(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	describeTopic := func(name string) bool { return b.allowed(w, rtTopic, name, opDescribe) }
	if r.Version >= 8 {
		return nil, b.checkOffsetFetchGroups(r, w, describeTopic)
	}
	if !b.allowed(w, rtGroup, r.Group, opDescribe) {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = errGroupAuthz
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errGroupAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	if r.Topics == nil {
		return nil, func(m kmsg.Response) {
			resp := m.(*kmsg.OffsetFetchResponse)
			resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !describeTopic(t.Topic) })
		}
	}
	var refused []kmsg.OffsetFetchRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.OffsetFetchRequestTopic) bool { return describeTopic(t.Topic) })
	if refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.OffsetFetchResponse)
		for _, t := range refused {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errTopicAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// checkOffsetFetchGroups is OffsetFetch v8+: per group, then per topic.
func (b *Broker) checkOffsetFetchGroups(r *kmsg.OffsetFetchRequest, w who, describeTopic func(string) bool) func(kmsg.Response) {
	var refusedGroups []string
	refusedTopics := map[string][]kmsg.OffsetFetchRequestGroupTopic{}
	filterAll := map[string]bool{}
	r.Groups = slices.DeleteFunc(r.Groups, func(g kmsg.OffsetFetchRequestGroup) bool {
		if !b.allowed(w, rtGroup, g.Group, opDescribe) {
			refusedGroups = append(refusedGroups, g.Group)
			return true
		}
		return false
	})
	for i := range r.Groups {
		g := &r.Groups[i]
		if g.Topics == nil {
			filterAll[g.Group] = true
			continue
		}
		var refused []kmsg.OffsetFetchRequestGroupTopic
		g.Topics, refused = splitSlice(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) bool {
			name := t.Topic
			if r.Version >= 10 {
				if name = b.topicIDName(t.TopicID); name == "" {
					return true
				}
			}
			return describeTopic(name)
		})
		if refused != nil {
			refusedTopics[g.Group] = refused
		}
	}
	if refusedGroups == nil && len(refusedTopics) == 0 && len(filterAll) == 0 {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if filterAll[g.Group] {
				g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
					name := t.Topic
					if r.Version >= 10 {
						name = b.topicIDName(t.TopicID)
					}
					return !describeTopic(name)
				})
			}
			for _, t := range refusedTopics[g.Group] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errTopicAuthz
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, name := range refusedGroups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = name, errGroupAuthz
			resp.Groups = append(resp.Groups, rg)
		}
	}
}

func checkFindCoordinator(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	keep := func(key string) bool { return b.allowed(w, rtGroup, key, opDescribe) }
	code := errGroupAuthz
	if r.CoordinatorType == 1 {
		keep = func(key string) bool { return b.allowed(w, rtTxnID, key, opDescribe) }
		code = errTxnAuthz
	}
	if r.Version < 4 {
		if keep(r.CoordinatorKey) {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID = code, -1
		return resp, nil
	}
	var refused []string
	r.CoordinatorKeys, refused = splitSlice(r.CoordinatorKeys, func(k *string) bool { return keep(*k) })
	if refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.FindCoordinatorResponse)
		for _, k := range refused {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode = k, -1, code
			resp.Coordinators = append(resp.Coordinators, c)
		}
	}
}

func splitDescribeGroups(m kmsg.Request, keep func(string) bool, code int16) func(kmsg.Response) {
	r := m.(*kmsg.DescribeGroupsRequest)
	var refused []string
	r.Groups, refused = splitSlice(r.Groups, func(g *string) bool { return keep(*g) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.DescribeGroupsResponse)
		for _, g := range refused {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
	}
}

func splitDeleteGroups(m kmsg.Request, keep func(string) bool, code int16) func(kmsg.Response) {
	r := m.(*kmsg.DeleteGroupsRequest)
	var refused []string
	r.Groups, refused = splitSlice(r.Groups, func(g *string) bool { return keep(*g) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.DeleteGroupsResponse)
		for _, g := range refused {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
	}
}

func splitConsumerGroupDescribe(m kmsg.Request, keep func(string) bool, code int16) func(kmsg.Response) {
	r := m.(*kmsg.ConsumerGroupDescribeRequest)
	var refused []string
	r.Groups, refused = splitSlice(r.Groups, func(g *string) bool { return keep(*g) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range refused {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
	}
}

func checkListGroups(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	if b.clusterAllowed(w, opDescribe) {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.ListGroupsResponse)
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !b.allowed(w, rtGroup, g.Group, opDescribe)
		})
	}
}

func checkCreateTopics(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	if b.clusterAllowed(w, opCreate) {
		return nil, nil
	}
	r := req.Body.(*kmsg.CreateTopicsRequest)
	var refused []kmsg.CreateTopicsRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.CreateTopicsRequestTopic) bool {
		return b.allowed(w, rtTopic, t.Topic, opCreate)
	})
	if refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.CreateTopicsResponse)
		for _, t := range refused {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, errTopicAuthz
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// checkDeleteTopics: DELETE on each topic, named or (v6+) by ID.
func checkDeleteTopics(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	keep := func(name string) bool { return b.allowed(w, rtTopic, name, opDelete) }
	var refusedNames []string
	var refused []kmsg.DeleteTopicsRequestTopic
	r.TopicNames, refusedNames = splitSlice(r.TopicNames, func(n *string) bool { return keep(*n) })
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.DeleteTopicsRequestTopic) bool {
		if t.Topic != nil {
			return keep(*t.Topic)
		}
		name := b.topicIDName(t.TopicID)
		return name == "" || keep(name) // an unknown ID: the handler answers it
	})
	if refusedNames == nil && refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = name, id, errTopicAuthz
			resp.Topics = append(resp.Topics, rt)
		}
		for _, n := range refusedNames {
			add(kmsg.StringPtr(n), [16]byte{})
		}
		for _, t := range refused {
			add(t.Topic, t.TopicID)
		}
	}
}

func splitDeleteRecords(m kmsg.Request, keep func(string) bool, code int16) func(kmsg.Response) {
	r := m.(*kmsg.DeleteRecordsRequest)
	var refused []kmsg.DeleteRecordsRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.DeleteRecordsRequestTopic) bool { return keep(t.Topic) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.DeleteRecordsResponse)
		for _, t := range refused {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkInitProducerID(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID != nil && *r.TransactionalID != "" {
		if b.allowed(w, rtTxnID, *r.TransactionalID, opWrite) {
			return nil, nil
		}
		return denyWhole(r, errTxnAuthz), nil
	}
	if b.clusterAllowed(w, opIdempotentWrite) || b.authz.AuthorizeAny(w.p, w.host, rtTopic, opWrite) {
		return nil, nil
	}
	return denyWhole(r, errClusterAuthz), nil
}

func checkOffsetForLeaderEpoch(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	keep, code := func(name string) bool { return b.allowed(w, rtTopic, name, opDescribe) }, errTopicAuthz
	if r.Version >= 3 && r.ReplicaID >= 0 {
		if b.clusterAllowed(w, opClusterAction) {
			return nil, nil
		}
		keep, code = func(string) bool { return false }, errClusterAuthz
	}
	var refused []kmsg.OffsetForLeaderEpochRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) bool { return keep(t.Topic) })
	if refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range refused {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// configResource is what the three config APIs' resources share.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// checkConfigs checks op on each resource of DescribeConfigs, AlterConfigs
// or IncrementalAlterConfigs: a topic on the topic, a broker (or its
// loggers) on the cluster.
func checkConfigs(op acl.Operation) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		keep := func(c configResource) bool {
			if c.typ == kmsg.ConfigResourceTypeTopic {
				return b.allowed(w, rtTopic, c.name, op)
			}
			return b.clusterAllowed(w, op)
		}
		code := func(c configResource) int16 {
			if c.typ == kmsg.ConfigResourceTypeTopic {
				return errTopicAuthz
			}
			return errClusterAuthz
		}
		var refused []configResource
		switch r := req.Body.(type) {
		case *kmsg.DescribeConfigsRequest:
			r.Resources = slices.DeleteFunc(r.Resources, func(x kmsg.DescribeConfigsRequestResource) bool {
				c := configResource{x.ResourceType, x.ResourceName}
				if keep(c) {
					return false
				}
				refused = append(refused, c)
				return true
			})
		case *kmsg.AlterConfigsRequest:
			r.Resources = slices.DeleteFunc(r.Resources, func(x kmsg.AlterConfigsRequestResource) bool {
				c := configResource{x.ResourceType, x.ResourceName}
				if keep(c) {
					return false
				}
				refused = append(refused, c)
				return true
			})
		case *kmsg.IncrementalAlterConfigsRequest:
			r.Resources = slices.DeleteFunc(r.Resources, func(x kmsg.IncrementalAlterConfigsRequestResource) bool {
				c := configResource{x.ResourceType, x.ResourceName}
				if keep(c) {
					return false
				}
				refused = append(refused, c)
				return true
			})
		}
		if refused == nil {
			return nil, nil
		}
		return nil, func(m kmsg.Response) {
			for _, c := range refused {
				switch resp := m.(type) {
				case *kmsg.DescribeConfigsResponse:
					x := kmsg.NewDescribeConfigsResponseResource()
					x.ResourceType, x.ResourceName, x.ErrorCode = c.typ, c.name, code(c)
					resp.Resources = append(resp.Resources, x)
				case *kmsg.AlterConfigsResponse:
					x := kmsg.NewAlterConfigsResponseResource()
					x.ResourceType, x.ResourceName, x.ErrorCode = c.typ, c.name, code(c)
					resp.Resources = append(resp.Resources, x)
				case *kmsg.IncrementalAlterConfigsResponse:
					x := kmsg.NewIncrementalAlterConfigsResponseResource()
					x.ResourceType, x.ResourceName, x.ErrorCode = c.typ, c.name, code(c)
					resp.Resources = append(resp.Resources, x)
				}
			}
		}
	}
}

func splitCreatePartitions(m kmsg.Request, keep func(string) bool, code int16) func(kmsg.Response) {
	r := m.(*kmsg.CreatePartitionsRequest)
	var refused []kmsg.CreatePartitionsRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.CreatePartitionsRequestTopic) bool { return keep(t.Topic) })
	if refused == nil {
		return nil
	}
	return func(m kmsg.Response) {
		resp := m.(*kmsg.CreatePartitionsResponse)
		for _, t := range refused {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

func checkOffsetDelete(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.OffsetDeleteRequest)
	if !b.allowed(w, rtGroup, r.Group, opDelete) {
		return denyWhole(r, errGroupAuthz), nil
	}
	var refused []kmsg.OffsetDeleteRequestTopic
	r.Topics, refused = splitSlice(r.Topics, func(t *kmsg.OffsetDeleteRequestTopic) bool {
		return b.allowed(w, rtTopic, t.Topic, opRead)
	})
	if refused == nil {
		return nil, nil
	}
	return nil, func(m kmsg.Response) {
		resp := m.(*kmsg.OffsetDeleteResponse)
		for _, t := range refused {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// checkConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every
// subscribed topic name (TOPIC_AUTHORIZATION_FAILED for the whole
// heartbeat if one is refused, as Kafka answers).
func checkConsumerGroupHeartbeat(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
	r := req.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !b.allowed(w, rtGroup, r.Group, opRead) {
		return denyWhole(r, errGroupAuthz), nil
	}
	for _, name := range r.SubscribedTopicNames {
		if !b.allowed(w, rtTopic, name, opDescribe) {
			return denyWhole(r, errTopicAuthz), nil
		}
	}
	return nil, nil
}
