package acceptance

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeCase is one metadata write of TestStoreOutageRefusesMetadataWrites.
type writeCase struct {
	name    string
	req     func() kmsg.Request
	refused int16 // the code during the outage
	alsoOK  int16 // a code that also means success after it (a retry of a write that took effect), or 0
	// applied reports whether the write is in effect, and what was seen;
	// nil: the write leaves nothing to see (InitProducerId).
	applied func(t *testing.T, cl *kgo.Client) (bool, string)
}

// The ACLs, user and client ID the cases write.
const (
	outageACL     = "outage-acl"     // created
	outagePreACL  = "outage-pre-acl" // created before the outage, deleted
	outageUser    = "outage-user"
	outageClient  = "outage-client"
	outageRetains = "3600000"
	outageSegment = "1048576"
)

// outageWriteCases are the writes, in the order they are sent; target is
// the replica order outageTopic/0 is reassigned to.
func outageWriteCases(target []int32) []writeCase {
	timedOut := kerr.RequestTimedOut.Code
	return []writeCase{
		{name: "CreateAcls", req: func() kmsg.Request { return createACL(outageACL) }, refused: timedOut,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) { return aclExists(t, cl, outageACL) }},
		{name: "DeleteAcls", req: deletePreACL, refused: timedOut,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				yes, what := aclExists(t, cl, outagePreACL)
				return !yes, what
			}},
		{name: "AlterUserScramCredentials", req: upsertSCRAM, refused: timedOut, applied: scramExists},
		{name: "AlterClientQuotas", req: setQuota, refused: timedOut, applied: quotaExists},
		{name: "IncrementalAlterConfigs", req: incrementalAlter, refused: timedOut,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				return topicConfigIs(t, cl, "retention.ms", outageRetains)
			}},
		{name: "AlterConfigs", req: legacyAlter, refused: timedOut,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				return topicConfigIs(t, cl, "segment.bytes", outageSegment)
			}},
		{name: "CreatePartitions", req: createPartitions, refused: timedOut, alsoOK: kerr.InvalidPartitions.Code,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				md := topicMetadata(t, cl, outageParts)
				return len(md.Partitions) == 2, fmt.Sprintf("%s has %d partitions", outageParts, len(md.Partitions))
			}},
		{name: "DeleteTopics", req: deleteTopic, refused: timedOut, alsoOK: kerr.UnknownTopicOrPartition.Code,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				md := topicMetadata(t, cl, outageDelete)
				return md.ErrorCode == kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%s: %v", outageDelete, kerr.ErrorForCode(md.ErrorCode))
			}},
		{name: "AlterPartitionReassignments", req: func() kmsg.Request { return reassign(target) }, refused: timedOut,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				md := topicMetadata(t, cl, outageTopic)
				if len(md.Partitions) == 0 {
					return false, fmt.Sprintf("%s: %v", outageTopic, kerr.ErrorForCode(md.ErrorCode))
				}
				got := md.Partitions[0].Replicas
				return slices.Equal(got, target), fmt.Sprintf("%s/0 replicas %v (target %v)", outageTopic, got, target)
			}},
		{name: "CreateTopics", req: createTopicReq, refused: timedOut, alsoOK: kerr.TopicAlreadyExists.Code,
			applied: func(t *testing.T, cl *kgo.Client) (bool, string) {
				md := topicMetadata(t, cl, outageCreate)
				return md.ErrorCode == 0, fmt.Sprintf("%s: %v", outageCreate, kerr.ErrorForCode(md.ErrorCode))
			}},
		{name: "InitProducerId", req: initProducerID, refused: kerr.CoordinatorLoadInProgress.Code},
	}
}

// sendOK sends req through cl (which routes it) and fails unless its
// first code is 0 or alsoOK.
func sendOK(t *testing.T, cl *kgo.Client, req kmsg.Request, alsoOK int16) error {
	resp, err := cl.Request(testCtx(t, 20*time.Second), req)
	if err != nil {
		return err
	}
	if code, msg := firstCode(resp); code != 0 && (alsoOK == 0 || code != alsoOK) {
		return fmt.Errorf("%v: %s", kerr.ErrorForCode(code), msg)
	}
	return nil
}

func createACL(topic string) *kmsg.CreateACLsRequest {
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host = "User:alice", "*"
	c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	return req
}

func deletePreACL() kmsg.Request {
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(outagePreACL), kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f)
	return req
}

// aclExists reports whether the broker cl asks lists an ACL on topic.
func aclExists(t *testing.T, cl *kgo.Client, topic string) (bool, string) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(topic), kmsg.ACLResourcePatternTypeLiteral
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(testCtx(t, 20*time.Second), cl)
	if err != nil {
		return false, err.Error()
	}
	return len(resp.Resources) > 0, fmt.Sprintf("ACLs on topic %s: %d resources listed (%v)", topic, len(resp.Resources), kerr.ErrorForCode(resp.ErrorCode))
}

func upsertSCRAM() kmsg.Request {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = outageUser, 1, 4096 // SCRAM-SHA-256
	u.Salt, u.SaltedPassword = bytes.Repeat([]byte{7}, 16), bytes.Repeat([]byte{9}, 32)
	req.Upsertions = append(req.Upsertions, u)
	return req
}

func scramExists(t *testing.T, cl *kgo.Client) (bool, string) {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
	u.Name = outageUser
	req.Users = append(req.Users, u)
	resp, err := req.RequestWith(testCtx(t, 20*time.Second), cl)
	if err != nil {
		return false, err.Error()
	}
	if resp.ErrorCode != 0 || len(resp.Results) != 1 {
		return false, fmt.Sprintf("describe %s: %v, %d results", outageUser, kerr.ErrorForCode(resp.ErrorCode), len(resp.Results))
	}
	r := resp.Results[0]
	return r.ErrorCode == 0 && len(r.CredentialInfos) > 0, fmt.Sprintf("user %s: %v, %d credentials", outageUser, kerr.ErrorForCode(r.ErrorCode), len(r.CredentialInfos))
}

func setQuota() kmsg.Request { return setQuotaFor(outageClient) }

// setQuotaFor sets a 1 MiB/s producer quota on client ID id.
func setQuotaFor(id string) *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "client-id", kmsg.StringPtr(id)
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", 1<<20
	e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	return req
}

func quotaExists(t *testing.T, cl *kgo.Client) (bool, string) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = "client-id", 0, kmsg.StringPtr(outageClient) // exact
	req.Components = append(req.Components, c)
	resp, err := req.RequestWith(testCtx(t, 20*time.Second), cl)
	if err != nil {
		return false, err.Error()
	}
	return len(resp.Entries) > 0, fmt.Sprintf("quotas of client %s: %d entries (%v)", outageClient, len(resp.Entries), kerr.ErrorForCode(resp.ErrorCode))
}

func incrementalAlter() kmsg.Request {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, outageConfigs
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(outageRetains)
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	return req
}

// legacyAlter replaces outageConfigs' overrides (AlterConfigs keeps none
// it is not given), retention.ms included.
func legacyAlter() kmsg.Request {
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, outageConfigs
	for k, v := range map[string]string{"retention.ms": outageRetains, "segment.bytes": outageSegment} {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

// topicConfigIs reports whether outageConfigs' key is value.
func topicConfigIs(t *testing.T, cl *kgo.Client, key, value string) (bool, string) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, outageConfigs, []string{key}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testCtx(t, 20*time.Second), cl)
	if err != nil {
		return false, err.Error()
	}
	if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 || resp.Resources[0].Configs[0].Value == nil {
		return false, fmt.Sprintf("%s of %s not described", key, outageConfigs)
	}
	got := *resp.Resources[0].Configs[0].Value
	return got == value, fmt.Sprintf("%s of %s is %s", key, outageConfigs, got)
}

func createPartitions() kmsg.Request {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = outageParts, 2
	req.Topics = append(req.Topics, rt)
	return req
}

func deleteTopic() kmsg.Request {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 15000
	req.TopicNames = []string{outageDelete}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(outageDelete)
	req.Topics = append(req.Topics, rt)
	return req
}

func reassign(target []int32) kmsg.Request {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = outageTopic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func createTopicReq() kmsg.Request {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = outageCreate, 1, 3
	req.Topics = append(req.Topics, rt)
	return req
}

func initProducerID() kmsg.Request {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = nil, -1, -1
	return req
}

// topicMetadata is topic's Metadata as the broker cl asks sees it
// (never auto-creating it).
func topicMetadata(t *testing.T, cl *kgo.Client, topic string) kmsg.MetadataResponseTopic {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t, 20*time.Second), cl)
	if err != nil || len(resp.Topics) != 1 {
		return kmsg.MetadataResponseTopic{ErrorCode: kerr.UnknownServerError.Code}
	}
	return resp.Topics[0]
}
