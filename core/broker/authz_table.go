package broker

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/wire"
)

// Resource types and operations, short.
const (
	rtTopic   = kmsg.ACLResourceTypeTopic
	rtGroup   = kmsg.ACLResourceTypeGroup
	rtCluster = kmsg.ACLResourceTypeCluster
	rtTxnID   = kmsg.ACLResourceTypeTransactionalId

	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

// authzTable is Kafka's authorization table (KIP-11 and the operations
// and resources table of Kafka's security docs) for the APIs the broker
// serves: one row per API key of apis; a test fails for a key without a
// row. rt/op is the check the API is known by; the check func reads the
// resource names from the request.
var authzTable = map[int16]authzRule{
	0:  {rtTopic, opWrite, checkProduce},                               // + WRITE on the transactional ID
	1:  {rtTopic, opRead, checkFetch},                                  // replicas: CLUSTER_ACTION on the cluster
	2:  {rtTopic, opDescribe, eachTopic(opDescribe, splitListOffsets)}, //
	3:  {rtTopic, opDescribe, checkMetadata},                           // hides topics; auto-create needs CREATE
	8:  {rtGroup, opRead, checkOffsetCommit},                           // + READ on each topic
	9:  {rtGroup, opDescribe, checkOffsetFetch},                        // + DESCRIBE on each topic
	10: {rtGroup, opDescribe, checkFindCoordinator},                    // transactions: DESCRIBE on the transactional ID
	11: {rtGroup, opRead, onGroup(opRead, func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group })},
	12: {rtGroup, opRead, onGroup(opRead, func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group })},
	13: {rtGroup, opRead, onGroup(opRead, func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group })},
	14: {rtGroup, opRead, onGroup(opRead, func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group })},
	15: {rtGroup, opDescribe, checkDescribeGroups}, // + authorized operations (KIP-430)
	16: {rtGroup, opDescribe, checkListGroups},     // DESCRIBE on the cluster lists all
	17: {},                                         // SaslHandshake: before authentication
	18: {},                                         // ApiVersions
	19: {rtTopic, opCreate, checkCreateTopics},     // or CREATE on the cluster
	20: {rtTopic, opDelete, checkDeleteTopics},
	21: {rtTopic, opDelete, eachTopic(opDelete, splitDeleteRecords)},
	22: {rtCluster, opIdempotentWrite, checkInitProducerID}, // or WRITE on any topic; transactions: WRITE on the ID
	23: {rtTopic, opDescribe, checkOffsetForLeaderEpoch},    // replicas: CLUSTER_ACTION
	24: {rtTxnID, opWrite, checkAddPartitionsToTxn},         // + WRITE on each topic; v4+: CLUSTER_ACTION
	25: {rtTxnID, opWrite, checkAddOffsetsToTxn},            // + READ on the group
	26: {rtTxnID, opWrite, checkEndTxn},
	27: {rtCluster, opClusterAction, onCluster(opClusterAction)}, // broker to broker
	28: {rtTxnID, opWrite, checkTxnOffsetCommit},                 // + READ on the group and each topic
	29: {rtCluster, opDescribe, onCluster(opDescribe)},
	30: {rtCluster, opAlter, onCluster(opAlter)},
	31: {rtCluster, opAlter, onCluster(opAlter)},
	32: {rtTopic, opDescribeConfigs, checkConfigs(opDescribeConfigs)}, // brokers: on the cluster
	33: {rtTopic, opAlterConfigs, checkConfigs(opAlterConfigs)},
	35: {rtCluster, opDescribe, onCluster(opDescribe)},
	36: {}, // SaslAuthenticate
	37: {rtTopic, opAlter, eachTopic(opAlter, splitCreatePartitions)},
	42: {rtGroup, opDelete, eachGroup(opDelete, splitDeleteGroups)},
	43: {rtCluster, opAlter, onCluster(opAlter)},
	44: {rtTopic, opAlterConfigs, checkConfigs(opAlterConfigs)},
	45: {rtCluster, opAlter, onCluster(opAlter)},
	46: {rtCluster, opDescribe, onCluster(opDescribe)},
	47: {rtGroup, opDelete, checkOffsetDelete}, // + READ on each topic
	48: {rtCluster, opDescribeConfigs, onCluster(opDescribeConfigs)},
	49: {rtCluster, opAlterConfigs, onCluster(opAlterConfigs)},
	50: {rtCluster, opDescribe, onCluster(opDescribe)},
	51: {rtCluster, opAlter, onCluster(opAlter)},
	60: {rtCluster, opDescribe, checkDescribeCluster},            // refuses nothing; computes authorized operations
	63: {rtCluster, opClusterAction, onCluster(opClusterAction)}, // broker to broker: "do you reach the store?"
	61: {rtTopic, opRead, onEveryTopic(opRead, func(r kmsg.Request) []string { // DescribeProducers
		var ts []string
		for _, t := range r.(*kmsg.DescribeProducersRequest).Topics {
			ts = append(ts, t.Topic)
		}
		return ts
	})},
	65: {rtTxnID, opDescribe, onEveryTxnID(opDescribe, func(r kmsg.Request) []string { // DescribeTransactions
		return r.(*kmsg.DescribeTransactionsRequest).TransactionalIDs
	})},
	66: {rtTxnID, opDescribe, checkListTransactions},   // lists the IDs the principal may DESCRIBE
	68: {rtGroup, opRead, checkConsumerGroupHeartbeat}, // + DESCRIBE on each subscribed topic
	69: {rtGroup, opDescribe, eachGroup(opDescribe, splitConsumerGroupDescribe)},
}

// onCluster refuses the whole request without op on the cluster.
func onCluster(op acl.Operation) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		if b.clusterAllowed(w, op) {
			return nil, nil
		}
		return denyWhole(req.Body, errClusterAuthz), nil
	}
}

// onEveryTopic refuses the whole request (every topic answered
// TOPIC_AUTHORIZATION_FAILED) unless the principal holds op on each of
// its topics.
func onEveryTopic(op acl.Operation, topics func(kmsg.Request) []string) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		for _, t := range topics(req.Body) {
			if !b.allowed(w, rtTopic, t, op) {
				return denyWhole(req.Body, errTopicAuthz), nil
			}
		}
		return nil, nil
	}
}

// onEveryTxnID is onEveryTopic for transactional IDs.
func onEveryTxnID(op acl.Operation, ids func(kmsg.Request) []string) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		for _, id := range ids(req.Body) {
			if !b.allowed(w, rtTxnID, id, op) {
				return denyWhole(req.Body, errTxnAuthz), nil
			}
		}
		return nil, nil
	}
}

// onGroup refuses the whole request without op on its group.
func onGroup(op acl.Operation, group func(kmsg.Request) string) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		if b.allowed(w, rtGroup, group(req.Body), op) {
			return nil, nil
		}
		return denyWhole(req.Body, errGroupAuthz), nil
	}
}

// splitFunc takes the resources keep refuses out of the request and
// returns the merge that answers them with code, or nil when keep
// refused none. It must not allocate when keep refuses none.
type splitFunc func(r kmsg.Request, keep func(name string) bool, code int16) func(kmsg.Response)

// eachTopic answers each topic without op with TOPIC_AUTHORIZATION_FAILED.
func eachTopic(op acl.Operation, split splitFunc) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		return nil, split(req.Body, func(name string) bool { return b.allowed(w, rtTopic, name, op) }, errTopicAuthz)
	}
}

// eachGroup answers each group without op with GROUP_AUTHORIZATION_FAILED.
func eachGroup(op acl.Operation, split splitFunc) authzCheck {
	return func(b *Broker, req *wire.Request, w who) (kmsg.Response, func(kmsg.Response)) {
		return nil, split(req.Body, func(name string) bool { return b.allowed(w, rtGroup, name, op) }, errGroupAuthz)
	}
}

// denyWhole is the request's response with code wherever the API puts a
// refusal of the whole request: the top-level error code, or each entry
// of the APIs that answer per entry.
func denyWhole(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind()
	switch r := r.(type) {
	case *kmsg.CreateACLsRequest:
		resp := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode = code
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode = code
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.AlterClientQuotasRequest:
		resp := resp.(*kmsg.AlterClientQuotasResponse)
		for _, e := range r.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			re.ErrorCode = code
			for _, c := range e.Entity {
				rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
				rc.Type, rc.Name = c.Type, c.Name
				re.Entity = append(re.Entity, rc)
			}
			resp.Entries = append(resp.Entries, re)
		}
		return resp
	case *kmsg.ElectLeadersRequest:
		resp := resp.(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = user, code
				resp.Results = append(resp.Results, res)
			}
		}
		for _, d := range r.Deletions {
			add(d.Name)
		}
		for _, u := range r.Upsertions {
			add(u.Name)
		}
		return resp
	case *kmsg.WriteTxnMarkersRequest:
		resp := resp.(*kmsg.WriteTxnMarkersResponse)
		for _, m := range r.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp
	case *kmsg.DescribeProducersRequest:
		resp := resp.(*kmsg.DescribeProducersResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DescribeTransactionsRequest:
		resp := resp.(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, code
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	case *kmsg.DescribeLogDirsRequest:
		resp := resp.(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = code // v3+; before, an empty answer, as Kafka gives
		return resp
	}
	// Every other API refused whole has a top-level error code.
	if f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(code))
	}
	return resp
}
