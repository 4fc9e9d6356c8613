package broker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

// handlerFunc serves one API. A Kafka error goes into the response; a Go
// error closes the connection.
type handlerFunc func(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error)

// api is one row of the handler table: the versions served and the handler.
type api struct {
	key      int16
	name     string
	min, max int16
	handle   handlerFunc
}

// apis is the one table of served APIs. ApiVersions advertises exactly
// this; a test checks that each advertised version is answered.
var apis []api

func init() {
	apis = []api{
		{0, "Produce", 3, 11, handleProduce},
		{1, "Fetch", 4, 16, handleFetch},
		{2, "ListOffsets", 1, 8, handleListOffsets},
		{3, "Metadata", 0, 12, handleMetadata},
		{8, "OffsetCommit", 0, 9, handleOffsetCommit},
		{9, "OffsetFetch", 0, 9, handleOffsetFetch},
		{10, "FindCoordinator", 0, 6, handleFindCoordinator},
		{11, "JoinGroup", 0, 9, handleJoinGroup},
		{12, "Heartbeat", 0, 4, handleHeartbeat},
		{13, "LeaveGroup", 0, 5, handleLeaveGroup},
		{14, "SyncGroup", 0, 5, handleSyncGroup},
		{15, "DescribeGroups", 0, 6, handleDescribeGroups},
		{16, "ListGroups", 0, 5, handleListGroups},
		{17, "SaslHandshake", 0, 1, handleSASLHandshake},
		{18, "ApiVersions", 0, 4, handleAPIVersions},
		{19, "CreateTopics", 0, 7, handleCreateTopics},
		{20, "DeleteTopics", 0, 6, handleDeleteTopics},
		{21, "DeleteRecords", 0, 2, handleDeleteRecords},
		{22, "InitProducerId", 0, 5, handleInitProducerID},
		{23, "OffsetForLeaderEpoch", 0, 4, handleOffsetForLeaderEpoch},
		{24, "AddPartitionsToTxn", 0, 4, handleAddPartitionsToTxn},
		{25, "AddOffsetsToTxn", 0, 3, handleAddOffsetsToTxn},
		{26, "EndTxn", 0, 5, handleEndTxn},
		{27, "WriteTxnMarkers", 0, 1, handleWriteTxnMarkers},
		{28, "TxnOffsetCommit", 0, 3, handleTxnOffsetCommit},
		{29, "DescribeAcls", 0, 3, handleDescribeACLs},
		{30, "CreateAcls", 0, 3, handleCreateACLs},
		{31, "DeleteAcls", 0, 3, handleDeleteACLs},
		{32, "DescribeConfigs", 0, 4, handleDescribeConfigs},
		{33, "AlterConfigs", 0, 2, handleAlterConfigs},
		{35, "DescribeLogDirs", 0, 4, handleDescribeLogDirs},
		{36, "SaslAuthenticate", 0, 2, handleSASLAuthenticate},
		{37, "CreatePartitions", 0, 3, handleCreatePartitions},
		{42, "DeleteGroups", 0, 3, handleDeleteGroups},
		{43, "ElectLeaders", 0, 2, handleElectLeaders},
		{44, "IncrementalAlterConfigs", 0, 1, handleIncrementalAlterConfigs},
		{45, "AlterPartitionReassignments", 0, 0, handleAlterPartitionReassignments},
		{46, "ListPartitionReassignments", 0, 0, handleListPartitionReassignments},
		{47, "OffsetDelete", 0, 0, handleOffsetDelete},
		{48, "DescribeClientQuotas", 0, 1, handleDescribeClientQuotas},
		{49, "AlterClientQuotas", 0, 1, handleAlterClientQuotas},
		{50, "DescribeUserScramCredentials", 0, 0, handleDescribeUserSCRAMCredentials},
		{51, "AlterUserScramCredentials", 0, 0, handleAlterUserSCRAMCredentials},
		{60, "DescribeCluster", 0, 1, handleDescribeCluster},
		{61, "DescribeProducers", 0, 0, handleDescribeProducers},
		{63, "BrokerHeartbeat", 0, 2, handleBrokerHeartbeat},
		{65, "DescribeTransactions", 0, 0, handleDescribeTransactions},
		{66, "ListTransactions", 0, 1, handleListTransactions},
		{68, "ConsumerGroupHeartbeat", 0, 1, handleConsumerGroupHeartbeat},
		{69, "ConsumerGroupDescribe", 0, 1, handleConsumerGroupDescribe},
	}
	sort.Slice(apis, func(i, j int) bool { return apis[i].key < apis[j].key })
	apiByKey = map[int16]*api{}
	for i := range apis {
		apiByKey[apis[i].key] = &apis[i]
	}
}

// apiByKey indexes apis; built with it in init.
var apiByKey map[int16]*api

// Handle dispatches one request through the table. It implements
// wire.Handler.
func (b *Broker) Handle(ctx context.Context, req *wire.Request) (*wire.Response, error) {
	if err := b.checkAuthenticated(req); err != nil {
		return nil, err
	}
	b.recordUsage(req)
	a := apiByKey[req.Key]
	if a == nil {
		return nil, fmt.Errorf("broker: api key %d is not served", req.Key)
	}
	if req.Version < a.min || req.Version > a.max || req.Body == nil {
		if req.Key == 18 { // ApiVersions answers even versions it does not know (KIP-511).
			return handleAPIVersions(b, ctx, req)
		}
		return nil, fmt.Errorf("broker: %s v%d is not served (v%d-v%d are)", a.name, req.Version, a.min, a.max)
	}
	start := time.Now()
	if obs := b.opts.ObserveQueue; obs != nil && !req.Received.IsZero() {
		obs(req.Key, start.Sub(req.Received))
	}
	var resp *wire.Response
	var err error
	if b.authz != nil {
		resp, err = b.authorize(ctx, req, a)
	} else {
		resp, err = a.handle(b, ctx, req)
	}
	took := time.Since(start)
	if obs := b.opts.ObserveRequest; obs != nil {
		obs(req.Key, took)
	}
	if err == nil && resp != nil {
		b.throttleAfter(req, resp, took)
	}
	return resp, err
}

// APIName names an API key as the handler table does ("Produce"), or
// "ApiKey<n>" for a key it does not serve.
func APIName(key int16) string {
	if a := apiByKey[key]; a != nil {
		return a.name
	}
	return fmt.Sprintf("ApiKey%d", key)
}

// APIKeys lists the served API keys in ascending order.
func APIKeys() []int16 {
	keys := make([]int16, len(apis))
	for i, a := range apis {
		keys[i] = a.key
	}
	return keys
}

// reply wraps a kmsg response for the wire.
func reply(resp kmsg.Response) (*wire.Response, error) {
	return &wire.Response{Msg: resp}, nil
}
