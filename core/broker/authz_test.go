package broker

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk"
)

// authzCase is one row of the ACL matrix: a request, the code a
// principal without grant gets, and the ACLs that let it through.
type authzCase struct {
	key   int16
	name  string
	req   func(e *authzEnv) kmsg.Request
	code  int16         // the *_AUTHORIZATION_FAILED of a principal lacking grant
	have  []acl.Binding // held before the request without grant
	grant []acl.Binding
	// denied/allowed, when set, replace "code is (not) among the
	// response's error codes" (APIs that hide rather than refuse).
	denied, allowed func(e *authzEnv, resp kmsg.Response) error
}

// authzEnv is a broker with authorizer: acl behind SASL/PLAIN, an admin
// super user, and per-case users that hold no ACL until granted.
type authzEnv struct {
	t       *testing.T
	b       *Broker
	admin   *kgo.Client
	topicID [16]byte
	delID   [16]byte // topic del20's, for DeleteTopics by ID
}

const authzTopic = "t"

func allowACL(rt acl.ResourceType, pt acl.PatternType, name, user string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: "User:" + user,
		Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func topicACL(user string, op acl.Operation) acl.Binding {
	return allowACL(rtTopic, kmsg.ACLResourcePatternTypeLiteral, authzTopic, user, op)
}

func groupACL(group, user string, op acl.Operation) acl.Binding {
	return allowACL(rtGroup, kmsg.ACLResourcePatternTypeLiteral, group, user, op)
}

func txnACL(user string, op acl.Operation) acl.Binding {
	return allowACL(rtTxnID, kmsg.ACLResourcePatternTypeLiteral, "tx", user, op)
}

func clusterACL(user string, op acl.Operation) acl.Binding {
	return allowACL(rtCluster, kmsg.ACLResourcePatternTypeLiteral, acl.ClusterName, user, op)
}

// authzUsers: admin, and one user per case (u0, u1, ...).
func authzUsers() map[string]string {
	users := map[string]string{"admin": "admin-pw"}
	for i := range 100 {
		users["u"+strconv.Itoa(i)] = "pw"
	}
	return users
}

func newAuthzEnv(t *testing.T, edit ...func(*config.Broker)) *authzEnv {
	t.Helper()
	edits := append([]func(*config.Broker){func(c *config.Broker) {
		c.Authorizer = "acl"
		c.SuperUsers = "User:admin"
	}}, edit...)
	b := saslBroker(t, []sdk.Authenticator{newPlainAuth(authzUsers())}, edits...)
	e := &authzEnv{t: t, b: b, admin: testClient(t, b, plainOpt("admin", "admin-pw"))}
	createTopic(t, e.admin, authzTopic, 1, nil)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(authzTopic)
	req.Topics = append(req.Topics, rt)
	e.topicID = request[*kmsg.MetadataResponse](t, e.admin, req).Topics[0].TopicID
	createTopic(t, e.admin, "del20", 1, nil)
	req.Topics[0].Topic = kmsg.StringPtr("del20")
	e.delID = request[*kmsg.MetadataResponse](t, e.admin, req).Topics[0].TopicID
	return e
}

// client is a fresh connection as user.
func (e *authzEnv) client(user string) *kgo.Client {
	v := kversion.Stable()
	v.SetMaxKeyVersion(24, 3) // AddPartitionsToTxn v4+ is broker to broker
	return testClient(e.t, e.b, plainOpt(user, "pw"), kgo.MaxVersions(v))
}

// grant creates ACLs through CreateAcls as the super user.
func (e *authzEnv) grant(bs ...acl.Binding) {
	e.t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp := request[*kmsg.CreateACLsResponse](e.t, e.admin, req)
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			e.t.Fatalf("CreateAcls: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// errorCodes collects every ErrorCode field of a response, at any depth.
func errorCodes(resp kmsg.Response) []int16 {
	var out []int16
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
					out = append(out, int16(v.Field(i).Int()))
				} else if f.IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(resp))
	return out
}

func (e *authzEnv) do(cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

func authzCases() []authzCase {
	lit := kmsg.ACLResourcePatternTypeLiteral
	produce := func(e *authzEnv) kmsg.Request {
		return produceRequest(1, authzTopic, valueBatch("v"))
	}
	fetch := func(replica int32) func(e *authzEnv) kmsg.Request {
		return func(e *authzEnv) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.ReplicaID, r.ReplicaState.ID = replica, replica
			r.MaxWaitMillis, r.MaxBytes = 10, 1<<20
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = authzTopic, e.topicID
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			r.Topics = append(r.Topics, ft)
			return r
		}
	}
	tp := func(e *authzEnv) []kmsg.OffsetCommitRequestTopic {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = authzTopic
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		return []kmsg.OffsetCommitRequestTopic{t}
	}
	return []authzCase{
		{key: 0, name: "Produce", req: produce, code: errTopicAuthz,
			grant: func() []acl.Binding { return []acl.Binding{topicACL("", opWrite)} }()},
		{key: 1, name: "Fetch", req: fetch(-1), code: errTopicAuthz, grant: []acl.Binding{topicACL("", opRead)}},
		{key: 1, name: "FetchAsReplica", req: fetch(2), code: errTopicAuthz, grant: []acl.Binding{clusterACL("", opClusterAction)}},
		{key: 2, name: "ListOffsets", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrListOffsetsRequest()
				r.ReplicaID = -1
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = authzTopic
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Timestamp = -1
				t.Partitions = append(t.Partitions, p)
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 3, name: "Metadata", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				t := kmsg.NewMetadataRequestTopic()
				t.Topic = kmsg.StringPtr(authzTopic)
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 3, name: "MetadataAllTopicsHides", grant: []acl.Binding{topicACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrMetadataRequest() },
			denied: func(e *authzEnv, m kmsg.Response) error {
				if n := len(m.(*kmsg.MetadataResponse).Topics); n != 0 {
					return fmt.Errorf("%d topics listed to a principal who may describe none", n)
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				if ts := m.(*kmsg.MetadataResponse).Topics; len(ts) != 1 || *ts[0].Topic != authzTopic {
					return fmt.Errorf("want exactly topic %s listed, got %d topics", authzTopic, len(ts))
				}
				return nil
			}},
		{key: 3, name: "MetadataAutoCreateNeedsCreate", code: errTopicAuthz,
			have:  []acl.Binding{allowACL(rtTopic, lit, "auto3", "", opDescribe)},
			grant: []acl.Binding{allowACL(rtTopic, lit, "auto3", "", opCreate)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				t := kmsg.NewMetadataRequestTopic()
				t.Topic = kmsg.StringPtr("auto3")
				r.Topics, r.AllowAutoTopicCreation = append(r.Topics, t), true
				return r
			},
			denied: func(e *authzEnv, m kmsg.Response) error {
				if codes := errorCodes(m); !slices.Contains(codes, errTopicAuthz) {
					return fmt.Errorf("codes %v, want TOPIC_AUTHORIZATION_FAILED", codes)
				}
				if e.b.topic("auto3") != nil {
					return fmt.Errorf("auto3 was auto-created without CREATE")
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				if e.b.topic("auto3") == nil {
					return fmt.Errorf("auto3 not auto-created with CREATE")
				}
				return nil
			}},
		{key: 3, name: "MetadataAuthorizedOperations", have: []acl.Binding{topicACL("", opDescribe)}, grant: []acl.Binding{topicACL("", opWrite)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				t := kmsg.NewMetadataRequestTopic()
				t.Topic = kmsg.StringPtr(authzTopic)
				r.Topics, r.IncludeTopicAuthorizedOperations = append(r.Topics, t), true
				return r
			},
			denied: func(e *authzEnv, m kmsg.Response) error {
				if ops := m.(*kmsg.MetadataResponse).Topics[0].AuthorizedOperations; ops != 1<<opDescribe {
					return fmt.Errorf("authorized operations %b, want DESCRIBE", ops)
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				if ops := m.(*kmsg.MetadataResponse).Topics[0].AuthorizedOperations; ops != 1<<opDescribe|1<<opWrite {
					return fmt.Errorf("authorized operations %b, want DESCRIBE and WRITE", ops)
				}
				return nil
			}},
		{key: 8, name: "OffsetCommit", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opRead), topicACL("", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Group, r.Generation, r.Topics = "g", -1, tp(e)
				return r
			}},
		{key: 8, name: "OffsetCommitTopic", code: errTopicAuthz, have: []acl.Binding{groupACL("g8", "", opRead)}, grant: []acl.Binding{topicACL("", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Group, r.Generation, r.Topics = "g8", -1, tp(e)
				return r
			}},
		{key: 9, name: "OffsetFetch", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opDescribe), topicACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Group = "g"
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic, t.Partitions = authzTopic, []int32{0}
				r.Topics = append(r.Topics, t)
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "g"
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic, gt.Partitions = authzTopic, []int32{0}
				g.Topics = append(g.Topics, gt)
				r.Groups = append(r.Groups, g)
				return r
			}},
		{key: 9, name: "OffsetFetchAllTopicsHides", have: []acl.Binding{groupACL("listed", "", opDescribe)},
			grant: []acl.Binding{topicACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Group = "listed"
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "listed"
				r.Groups = append(r.Groups, g)
				return r
			},
			denied: func(e *authzEnv, m kmsg.Response) error {
				if n := offsetFetchTopics(m); n != 0 {
					return fmt.Errorf("%d topics' offsets shown to a principal who may describe none", n)
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				if n := offsetFetchTopics(m); n != 1 {
					return fmt.Errorf("%d topics' offsets shown, want 1", n)
				}
				return nil
			}},
		{key: 10, name: "FindCoordinator", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
				return r
			}},
		{key: 11, name: "JoinGroup", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrJoinGroupRequest()
				r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g", 10000, 10000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name = "range"
				r.Protocols = append(r.Protocols, p)
				return r
			}},
		{key: 12, name: "Heartbeat", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrHeartbeatRequest()
				r.Group, r.Generation, r.MemberID = "g", 1, "m"
				return r
			}},
		{key: 13, name: "LeaveGroup", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrLeaveGroupRequest()
				r.Group, r.MemberID = "g", "m"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "m"
				r.Members = append(r.Members, m)
				return r
			}},
		{key: 14, name: "SyncGroup", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrSyncGroupRequest()
				r.Group, r.Generation, r.MemberID = "g", 1, "m"
				return r
			}},
		{key: 15, name: "DescribeGroups", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups = []string{"g"}
				return r
			}},
		{key: 16, name: "ListGroupsHides", grant: []acl.Binding{groupACL("listed", "", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrListGroupsRequest() },
			denied: func(e *authzEnv, m kmsg.Response) error {
				if n := len(m.(*kmsg.ListGroupsResponse).Groups); n != 0 {
					return fmt.Errorf("%d groups listed to a principal who may describe none", n)
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				gs := m.(*kmsg.ListGroupsResponse).Groups
				if len(gs) != 1 || gs[0].Group != "listed" {
					return fmt.Errorf("want exactly group listed, got %v", gs)
				}
				return nil
			}},
		{key: 17, name: "SaslHandshake"},
		{key: 18, name: "ApiVersions", req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrApiVersionsRequest() }},
		{key: 19, name: "CreateTopics", code: errTopicAuthz, grant: []acl.Binding{allowACL(rtTopic, lit, "new19", "", opCreate)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrCreateTopicsRequest()
				t := kmsg.NewCreateTopicsRequestTopic()
				t.Topic, t.NumPartitions, t.ReplicationFactor = "new19", 1, 1
				r.Topics, r.TimeoutMillis, r.ValidateOnly = append(r.Topics, t), 5000, true
				return r
			}},
		{key: 20, name: "DeleteTopics", code: errTopicAuthz, grant: []acl.Binding{allowACL(rtTopic, lit, "nothere", "", opDelete)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.TopicNames, r.TimeoutMillis = []string{"nothere"}, 5000
				t := kmsg.NewDeleteTopicsRequestTopic()
				t.Topic = kmsg.StringPtr("nothere")
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 20, name: "DeleteTopicsByID", code: errTopicAuthz, grant: []acl.Binding{allowACL(rtTopic, lit, "del20", "", opDelete)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.TimeoutMillis = 5000
				t := kmsg.NewDeleteTopicsRequestTopic()
				t.TopicID = e.delID
				r.Topics = append(r.Topics, t)
				return r
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				if codes := errorCodes(m); slices.ContainsFunc(codes, isAuthzCode) {
					return fmt.Errorf("still refused: %v", codes)
				}
				if e.b.topic("del20") != nil {
					return fmt.Errorf("topic del20 still exists")
				}
				return nil
			}},
		{key: 21, name: "DeleteRecords", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opDelete)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDeleteRecordsRequest()
				t := kmsg.NewDeleteRecordsRequestTopic()
				t.Topic = authzTopic
				p := kmsg.NewDeleteRecordsRequestTopicPartition()
				t.Partitions = append(t.Partitions, p)
				r.Topics, r.TimeoutMillis = append(r.Topics, t), 5000
				return r
			}},
		{key: 22, name: "InitProducerId", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opIdempotentWrite)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.TransactionTimeoutMillis = 60000
				return r
			}},
		{key: 22, name: "InitProducerIdByTopicWrite", code: errClusterAuthz, grant: []acl.Binding{topicACL("", opWrite)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrInitProducerIDRequest() }},
		{key: 23, name: "OffsetForLeaderEpoch", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opDescribe)},
			req: offsetForLeaderEpoch(-1)},
		{key: 23, name: "OffsetForLeaderEpochAsReplica", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opClusterAction)},
			req: offsetForLeaderEpoch(2)},
		// The transaction APIs: skipped until the broker serves them.
		{key: 24, name: "AddPartitionsToTxn", code: errTxnAuthz, grant: []acl.Binding{txnACL("", opWrite), topicACL("", opWrite)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				t := kmsg.NewAddPartitionsToTxnRequestTopic()
				t.Topic, t.Partitions = authzTopic, []int32{0}
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 24, name: "AddPartitionsToTxnTopic", code: errTopicAuthz, have: []acl.Binding{txnACL("", opWrite)}, grant: []acl.Binding{topicACL("", opWrite)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				t := kmsg.NewAddPartitionsToTxnRequestTopic()
				t.Topic, t.Partitions = authzTopic, []int32{0}
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 25, name: "AddOffsetsToTxn", code: errTxnAuthz, grant: []acl.Binding{txnACL("", opWrite), groupACL("g", "", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAddOffsetsToTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", 1, 0, "g"
				return r
			}},
		{key: 26, name: "EndTxn", code: errTxnAuthz, grant: []acl.Binding{txnACL("", opWrite)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrEndTxnRequest()
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				return r
			}},
		{key: 28, name: "TxnOffsetCommit", code: errGroupAuthz, have: []acl.Binding{txnACL("", opWrite)},
			grant: []acl.Binding{groupACL("g", "", opRead), topicACL("", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrTxnOffsetCommitRequest()
				r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = "tx", "g", 1, 0, -1
				t := kmsg.NewTxnOffsetCommitRequestTopic()
				t.Topic, t.TopicID = authzTopic, e.topicID
				t.Partitions = append(t.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 27, name: "WriteTxnMarkers", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opClusterAction)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrWriteTxnMarkersRequest()
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = 1, 0, 0
				t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				t.Topic, t.Partitions = authzTopic, []int32{0}
				m.Topics = append(m.Topics, t)
				r.Markers = append(r.Markers, m)
				return r
			}},
		{key: 63, name: "BrokerHeartbeat", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opClusterAction)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrBrokerHeartbeatRequest()
				r.BrokerID, r.BrokerEpoch = 99, -1
				return r
			}},
		{key: 61, name: "DescribeProducers", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDescribeProducersRequest()
				t := kmsg.NewDescribeProducersRequestTopic()
				t.Topic, t.Partitions = authzTopic, []int32{0}
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 65, name: "DescribeTransactions", code: errTxnAuthz, grant: []acl.Binding{txnACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDescribeTransactionsRequest()
				r.TransactionalIDs = []string{"tx"}
				return r
			}},
		{key: 66, name: "ListTransactionsHides", grant: []acl.Binding{allowACL(rtTxnID, lit, "listed-tx", "", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() },
			denied: func(e *authzEnv, m kmsg.Response) error {
				if ts := m.(*kmsg.ListTransactionsResponse).TransactionStates; len(ts) != 0 {
					return fmt.Errorf("%d transactions listed to a principal who may describe none", len(ts))
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				ts := m.(*kmsg.ListTransactionsResponse).TransactionStates
				if len(ts) != 1 || ts[0].TransactionalID != "listed-tx" {
					return fmt.Errorf("want exactly listed-tx, got %v", ts)
				}
				return nil
			}},
		{key: 29, name: "DescribeAcls", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrDescribeACLsRequest() }},
		{key: 30, name: "CreateAcls", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrCreateACLsRequest()
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = rtTopic, "other", lit
				c.Principal, c.Host, c.Operation, c.PermissionType = "User:nobody", "*", opRead, kmsg.ACLPermissionTypeAllow
				r.Creations = append(r.Creations, c)
				return r
			}},
		{key: 31, name: "DeleteAcls", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDeleteACLsRequest()
				f := kmsg.NewDeleteACLsRequestFilter()
				f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:nobody"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				r.Filters = append(r.Filters, f)
				return r
			}},
		{key: 32, name: "DescribeConfigs", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opDescribeConfigs)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				x := kmsg.NewDescribeConfigsRequestResource()
				x.ResourceType, x.ResourceName = kmsg.ConfigResourceTypeTopic, authzTopic
				r.Resources = append(r.Resources, x)
				return r
			}},
		{key: 32, name: "DescribeConfigsBroker", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opDescribeConfigs)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDescribeConfigsRequest()
				x := kmsg.NewDescribeConfigsRequestResource()
				x.ResourceType, x.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
				r.Resources = append(r.Resources, x)
				return r
			}},
		{key: 33, name: "AlterConfigs", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opAlterConfigs)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAlterConfigsRequest()
				x := kmsg.NewAlterConfigsRequestResource()
				x.ResourceType, x.ResourceName = kmsg.ConfigResourceTypeTopic, authzTopic
				r.Resources, r.ValidateOnly = append(r.Resources, x), true
				return r
			}},
		{key: 35, name: "DescribeLogDirs", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }},
		{key: 36, name: "SaslAuthenticate"},
		{key: 37, name: "CreatePartitions", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrCreatePartitionsRequest()
				t := kmsg.NewCreatePartitionsRequestTopic()
				t.Topic, t.Count = authzTopic, 2
				r.Topics, r.TimeoutMillis, r.ValidateOnly = append(r.Topics, t), 5000, true
				return r
			}},
		{key: 42, name: "DeleteGroups", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opDelete)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDeleteGroupsRequest()
				r.Groups = []string{"g"}
				return r
			}},
		{key: 43, name: "ElectLeaders", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrElectLeadersRequest()
				t := kmsg.NewElectLeadersRequestTopic()
				t.Topic, t.Partitions = authzTopic, []int32{0}
				r.Topics, r.TimeoutMillis = append(r.Topics, t), 5000
				return r
			}},
		{key: 44, name: "IncrementalAlterConfigs", code: errTopicAuthz, grant: []acl.Binding{topicACL("", opAlterConfigs)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				x := kmsg.NewIncrementalAlterConfigsRequestResource()
				x.ResourceType, x.ResourceName = kmsg.ConfigResourceTypeTopic, authzTopic
				r.Resources, r.ValidateOnly = append(r.Resources, x), true
				return r
			}},
		{key: 45, name: "AlterPartitionReassignments", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				r.TimeoutMillis = 5000
				return r
			}},
		{key: 46, name: "ListPartitionReassignments", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() }},
		{key: 47, name: "OffsetDelete", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opDelete), topicACL("", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = "g"
				t := kmsg.NewOffsetDeleteRequestTopic()
				t.Topic = authzTopic
				t.Partitions = append(t.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
				r.Topics = append(r.Topics, t)
				return r
			}},
		{key: 48, name: "DescribeClientQuotas", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opDescribeConfigs)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }},
		{key: 49, name: "AlterClientQuotas", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opAlterConfigs)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAlterClientQuotasRequest()
				en := kmsg.NewAlterClientQuotasRequestEntry()
				c := kmsg.NewAlterClientQuotasRequestEntryEntity()
				c.Type, c.Name = "user", kmsg.StringPtr("x")
				en.Entity = append(en.Entity, c)
				op := kmsg.NewAlterClientQuotasRequestEntryOp()
				op.Key, op.Value = "producer_byte_rate", 1024
				en.Ops = append(en.Ops, op)
				r.Entries, r.ValidateOnly = append(r.Entries, en), true
				return r
			}},
		{key: 50, name: "DescribeUserScramCredentials", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() }},
		{key: 51, name: "AlterUserScramCredentials", code: errClusterAuthz, grant: []acl.Binding{clusterACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
				d.Name, d.Mechanism = "nobody", 2
				r.Deletions = append(r.Deletions, d)
				return r
			}},
		{key: 60, name: "DescribeClusterAuthorizedOperations", grant: []acl.Binding{clusterACL("", opAlter)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrDescribeClusterRequest()
				r.IncludeClusterAuthorizedOperations = true
				return r
			},
			denied: func(e *authzEnv, m kmsg.Response) error {
				resp := m.(*kmsg.DescribeClusterResponse)
				if resp.ErrorCode != 0 || resp.ClusterAuthorizedOperations != 0 {
					return fmt.Errorf("code %d, authorized operations %b; want served, none", resp.ErrorCode, resp.ClusterAuthorizedOperations)
				}
				return nil
			},
			allowed: func(e *authzEnv, m kmsg.Response) error {
				if ops := m.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != 1<<opAlter|1<<opDescribe {
					return fmt.Errorf("authorized operations %b, want ALTER and DESCRIBE", ops)
				}
				return nil
			}},
		{key: 68, name: "ConsumerGroupHeartbeat", code: errGroupAuthz, grant: []acl.Binding{groupACL("g68", "", opRead)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.Group, r.MemberID, r.MemberEpoch = "g68", "", -1
				return r
			}},
		{key: 68, name: "ConsumerGroupHeartbeatTopic", code: errTopicAuthz, have: []acl.Binding{groupACL("g68t", "", opRead)},
			grant: []acl.Binding{topicACL("", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.Group, r.MemberID, r.MemberEpoch = "g68t", "", -1
				r.SubscribedTopicNames = []string{authzTopic}
				return r
			}},
		{key: 69, name: "ConsumerGroupDescribe", code: errGroupAuthz, grant: []acl.Binding{groupACL("g", "", opDescribe)},
			req: func(e *authzEnv) kmsg.Request {
				r := kmsg.NewPtrConsumerGroupDescribeRequest()
				r.Groups = []string{"g"}
				return r
			}},
	}
}

func offsetForLeaderEpoch(replica int32) func(e *authzEnv) kmsg.Request {
	return func(e *authzEnv) kmsg.Request {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.ReplicaID = replica
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = authzTopic
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.LeaderEpoch, p.CurrentLeaderEpoch = 0, -1
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}
}

// TestAuthzTableCoversEveryAPI fails when a handler is added without a
// row in authzTable or a case in the ACL matrix.
func TestAuthzTableCoversEveryAPI(t *testing.T) {
	cases := authzCases()
	for _, a := range apis {
		if _, ok := authzTable[a.key]; !ok {
			t.Errorf("api %d (%s) has no row in authzTable", a.key, a.name)
		}
		if !slices.ContainsFunc(cases, func(c authzCase) bool { return c.key == a.key }) {
			t.Errorf("api %d (%s) has no case in the ACL matrix (authzCases)", a.key, a.name)
		}
	}
}

// TestAuthzMatrix walks every API with a principal lacking the ACL
// (expecting the API's *_AUTHORIZATION_FAILED) and then holding it
// (expecting that code gone), over SASL/PLAIN with authorizer: acl.
func TestAuthzMatrix(t *testing.T) {
	e := newAuthzEnv(t)
	// A group to list (ListGroups), made by the super user.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "listed", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = authzTopic
	ct.Partitions = append(ct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, ct)
	if codes := errorCodes(request[*kmsg.OffsetCommitResponse](t, e.admin, commit)); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
		t.Fatalf("admin offset commit: %v", codes)
	}
	// Transactions to list (ListTransactions), begun by the super user;
	// the super user sees both.
	for _, id := range []string{"listed-tx", "hidden-tx"} {
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		for deadline := time.Now().Add(20 * time.Second); ; {
			resp, err := e.do(e.admin, init)
			if err == nil && resp.(*kmsg.InitProducerIDResponse).ErrorCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("InitProducerId %s as admin: %v %v", id, err, resp)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if resp, err := e.do(e.admin, kmsg.NewPtrListTransactionsRequest()); err != nil || len(resp.(*kmsg.ListTransactionsResponse).TransactionStates) < 2 {
		t.Fatalf("the super user lists %v (err %v), want listed-tx and hidden-tx", resp, err)
	}
	for i, c := range authzCases() {
		t.Run(fmt.Sprintf("%d_%s", c.key, c.name), func(t *testing.T) {
			if apiByKey[c.key] == nil {
				t.Skipf("api %d is not served (yet)", c.key)
			}
			rule := authzTable[c.key]
			if c.req == nil || c.grant == nil {
				// Served before or without authorization: no check, and
				// (where it can be sent after authentication) answered.
				if rule.check != nil {
					t.Fatalf("api %d is checked; the matrix expects it open", c.key)
				}
				if c.req == nil {
					return
				}
			}
			user := "u" + strconv.Itoa(i)
			cl := e.client(user)
			if c.have != nil {
				e.grant(as(user, c.have)...)
				e.waitACLs(as(user, c.have))
			}
			resp, err := e.do(cl, c.req(e))
			if err != nil {
				t.Fatalf("as %s without ACLs: %v", user, err)
			}
			if c.grant == nil {
				if codes := errorCodes(resp); slices.ContainsFunc(codes, isAuthzCode) {
					t.Fatalf("open API answered %v", codes)
				}
				return
			}
			if err := c.deniedCheck(e, resp); err != nil {
				t.Fatalf("as %s without ACLs: %v", user, err)
			}
			grants := as(user, c.grant)
			e.grant(grants...)
			// The grant reaches the authorizer through the store watch.
			deadline := time.Now().Add(10 * time.Second)
			for {
				resp, err = e.do(cl, c.req(e))
				if err != nil {
					t.Fatalf("as %s with %v: %v", user, grants, err)
				}
				err = c.allowedCheck(e, resp)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("as %s with %v: %v", user, grants, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func isAuthzCode(c int16) bool {
	return c == errTopicAuthz || c == errGroupAuthz || c == errClusterAuthz || c == errTxnAuthz
}

func (c authzCase) deniedCheck(e *authzEnv, resp kmsg.Response) error {
	if c.denied != nil {
		return c.denied(e, resp)
	}
	if codes := errorCodes(resp); !slices.Contains(codes, c.code) {
		return fmt.Errorf("want %v among the error codes, got %v", kerr.ErrorForCode(c.code), codes)
	}
	return nil
}

func (c authzCase) allowedCheck(e *authzEnv, resp kmsg.Response) error {
	if c.allowed != nil {
		return c.allowed(e, resp)
	}
	if codes := errorCodes(resp); slices.ContainsFunc(codes, isAuthzCode) {
		return fmt.Errorf("still refused: error codes %v", codes)
	}
	return nil
}

// as gives bindings to user.
func as(user string, bs []acl.Binding) []acl.Binding {
	out := make([]acl.Binding, len(bs))
	for i, b := range bs {
		b.Principal = "User:" + user
		out[i] = b
	}
	return out
}

// waitACLs waits until the broker's authorizer holds every binding of bs.
func (e *authzEnv) waitACLs(bs []acl.Binding) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		held := e.b.authz.Bindings()
		if !slices.ContainsFunc(bs, func(b acl.Binding) bool { return !slices.Contains(held, b) }) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the authorizer does not hold %v", bs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitN waits until the broker's authorizer holds exactly n bindings.
func (e *authzEnv) waitN(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.b.authz.Bindings()) != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("the authorizer holds %d bindings, want %d", len(e.b.authz.Bindings()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// offsetFetchTopics counts the topics of an OffsetFetch answer, any version.
func offsetFetchTopics(m kmsg.Response) int {
	resp := m.(*kmsg.OffsetFetchResponse)
	n := len(resp.Topics)
	for _, g := range resp.Groups {
		n += len(g.Topics)
	}
	return n
}
