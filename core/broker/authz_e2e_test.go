package broker

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthzWithKafkaClients: ACLs managed with kadm (Kafka's admin API)
// govern franz-go producers and consumers: a PREFIXED WRITE lets alice
// produce, a DENY takes one topic back, and bob, holding nothing, is
// refused with TOPIC_AUTHORIZATION_FAILED.
func TestAuthzWithKafkaClients(t *testing.T) {
	e := newAuthzEnv(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(e.admin)
	createTopic(t, e.admin, "pay-in", 1, nil)
	createTopic(t, e.admin, "pay-secret", 1, nil)
	b := kadm.NewACLs().Allow("User:u1").AllowHosts().Topics("pay-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpRead)
	if res, err := adm.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	deny := kadm.NewACLs().Deny("User:u1").DenyHosts().Topics("pay-secret").Operations(kadm.OpWrite)
	if res, err := adm.CreateACLs(ctx, deny); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs deny: %v %v", err, res)
	}
	group := kadm.NewACLs().Allow("User:u1").AllowHosts().Groups("pay-readers").Operations(kadm.OpRead)
	if res, err := adm.CreateACLs(ctx, group); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs group: %v %v", err, res)
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow("User:u1").AllowHosts().Deny("User:u1").DenyHosts().AnyResource().
		ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Fatalf("DescribeACLs: %v", d.Err)
		}
		n += len(d.Described)
	}
	if n != 4 {
		t.Fatalf("DescribeACLs lists %d ACLs of User:u1, want 4 (%+v)", n, described)
	}
	waitHeld := func(count int) {
		t.Helper()
		e.waitN(count)
	}
	waitHeld(4)

	alice := testClient(t, e.b, plainOpt("u1", "pw"), kgo.DisableIdempotentWrite(), kgo.ConsumeTopics("pay-in"),
		kgo.ConsumerGroup("pay-readers"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "pay-in", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("alice produces to pay-in: %v", err)
	}
	err = alice.ProduceSync(ctx, &kgo.Record{Topic: "pay-secret", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces to pay-secret (DENY WRITE): %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	fs := alice.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatalf("alice consumes pay-in in group pay-readers: %v", errs)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "ok" {
		t.Fatalf("alice consumed %v", recs)
	}

	bob := testClient(t, e.b, plainOpt("u2", "pw"), kgo.DisableIdempotentWrite())
	err = bob.ProduceSync(ctx, &kgo.Record{Topic: "pay-in", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// DeleteAcls through kadm removes the prefixed grant; alice is refused.
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:u1").AllowHosts().Topics("pay-").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAny))
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 2 {
		t.Fatalf("DeleteACLs: %v %+v", err, del)
	}
	waitHeld(2)
	err = alice.ProduceSync(ctx, &kgo.Record{Topic: "pay-in", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produces after her grant was deleted: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestACLAPIsWithoutAuthorizer: without authorizer the ACL APIs answer
// SECURITY_DISABLED, as Kafka's do, and nothing is checked.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rtTopic, "x", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:a", "*", opRead, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	if resp := request[*kmsg.CreateACLsResponse](t, cl, req); resp.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("CreateAcls without authorizer: code %d, want SECURITY_DISABLED", resp.Results[0].ErrorCode)
	}
	if resp := request[*kmsg.DescribeACLsResponse](t, cl, kmsg.NewPtrDescribeACLsRequest()); resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DescribeAcls without authorizer: code %d, want SECURITY_DISABLED", resp.ErrorCode)
	}
}

// TestACLAdminSarama: sarama's ClusterAdmin (CreateAcls/DescribeAcls/
// DeleteAcls v1 at Kafka 2.0, v0 before) manages the same ACLs, and a
// sarama producer holding none is refused.
func TestACLAdminSarama(t *testing.T) {
	e := newAuthzEnv(t)
	saramaCfg := func(user, pass string, v sarama.KafkaVersion) *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.Version = v
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 0
		return cfg
	}
	for _, v := range []sarama.KafkaVersion{sarama.V1_1_0_0, sarama.V3_0_0_0} {
		t.Run(v.String(), func(t *testing.T) {
			adm, err := sarama.NewClusterAdmin([]string{e.b.Addr()}, saramaCfg("admin", "admin-pw", v))
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			res := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: authzTopic, ResourcePatternType: sarama.AclPatternLiteral}
			a := sarama.Acl{Principal: "User:u3", Host: "*", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionAllow}
			if err := adm.CreateACL(res, a); err != nil {
				t.Fatalf("CreateACL: %v", err)
			}
			principal := "User:u3"
			filter := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
				Principal: &principal, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
			if v.IsAtLeast(sarama.V2_0_0_0) {
				filter.Version = 1
			} else {
				filter.ResourcePatternTypeFilter = sarama.AclPatternLiteral
			}
			listed, err := adm.ListAcls(filter)
			if err != nil || len(listed) != 1 || len(listed[0].Acls) != 1 || listed[0].ResourceName != authzTopic {
				t.Fatalf("ListAcls: %v %+v", err, listed)
			}
			deleted, err := adm.DeleteACL(filter, false)
			if err != nil || len(deleted) != 1 {
				t.Fatalf("DeleteACL: %v %+v", err, deleted)
			}
			e.waitN(0)
		})
	}
	prod, err := sarama.NewSyncProducer([]string{e.b.Addr()}, saramaCfg("u4", "pw", sarama.V3_0_0_0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	_, _, err = prod.SendMessage(&sarama.ProducerMessage{Topic: authzTopic, Value: sarama.StringEncoder("no")})
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("sarama produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
