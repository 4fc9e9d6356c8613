package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/config"
)

// joinAndSync makes a one-member classic group with raw requests and
// returns the member ID and generation.
func joinAndSync(t *testing.T, cl *kgo.Client, grp string) (string, int32) {
	t.Helper()
	ctx := ctxT(t)
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"events"}
	join := func(memberID string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = grp, memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 5000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := join("")
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an ID (KIP-394)", first.ErrorCode, first.MemberID)
	}
	j := join(first.MemberID)
	if j.ErrorCode != 0 || j.LeaderID != first.MemberID {
		t.Fatalf("join: code %d leader %q", j.ErrorCode, j.LeaderID)
	}
	as := kmsg.NewConsumerMemberAssignment()
	as.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "events", Partitions: []int32{0, 1}}}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = grp, j.MemberID, j.Generation
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: j.MemberID, MemberAssignment: as.AppendTo(nil)}}
	s, err := sreq.RequestWith(ctx, cl)
	if err != nil || s.ErrorCode != 0 {
		t.Fatalf("sync: %v code %d", err, s.ErrorCode)
	}
	return j.MemberID, j.Generation
}

// Offsets and group state survive a broker restart: both are rebuilt
// from __consumer_offsets, so the member keeps its generation.
func TestGroupStateSurvivesRestart(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.Listeners = "127.0.0.1:0"
	cfg.LogDirs = t.TempDir()
	groupConfig(&cfg)
	b := startBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "events", 2, nil)
	member, gen := joinAndSync(t, cl, "survivor")

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "survivor", member, gen
	meta := "checkpoint"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "events", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 42, LeaderEpoch: 0, Metadata: &meta},
		{Partition: 1, Offset: 7, LeaderEpoch: -1},
	}}}
	cr, err := commit.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cr.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2)
	ctx := ctxT(t)

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "survivor", member, gen
	if r, err := hb.RequestWith(ctx, cl2); err != nil || r.ErrorCode != 0 {
		t.Fatalf("heartbeat after restart: %v code %v", err, kerr.ErrorForCode(r.ErrorCode))
	}
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Groups = []string{"survivor"}
	d, err := dr.RequestWith(ctx, cl2)
	if err != nil {
		t.Fatal(err)
	}
	g := d.Groups[0]
	if g.State != "Stable" || g.Protocol != "range" || len(g.Members) != 1 || g.Members[0].MemberID != member {
		t.Fatalf("after restart: state %s protocol %s members %+v", g.State, g.Protocol, g.Members)
	}
	fr := kmsg.NewPtrOffsetFetchRequest()
	fr.Group = "survivor"
	fr.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "events", Partitions: []int32{0, 1}}}
	f, err := fr.RequestWith(ctx, cl2)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Topics[0].Partitions
	if got[0].Offset != 42 || got[0].LeaderEpoch != 0 || got[0].Metadata == nil || *got[0].Metadata != "checkpoint" || got[1].Offset != 7 {
		t.Fatalf("offsets after restart: %+v", got)
	}

	// __consumer_offsets is internal and compacted.
	mr := kmsg.NewPtrMetadataRequest()
	mr.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(offsetsTopic)}}
	m, err := mr.RequestWith(ctx, cl2)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Topics[0].IsInternal || len(m.Topics[0].Partitions) != int(cfg.OffsetsTopicNumPartitions) {
		t.Fatalf("__consumer_offsets: internal %v, %d partitions", m.Topics[0].IsInternal, len(m.Topics[0].Partitions))
	}
	if pol := b2.topic(offsetsTopic).cfg.CleanupPolicy; len(pol) != 1 || pol[0] != "compact" {
		t.Fatalf("__consumer_offsets cleanup.policy = %v", pol)
	}
}

// "DeleteGroups ... NON_EMPTY_GROUP" while the group has members; a group
// with no members describes as Empty and can be deleted, offsets and all.
func TestGroupDeleteOnlyWhenEmpty(t *testing.T) {
	b := testBroker(t, groupConfig)
	cl := testClient(t, b)
	createTopic(t, cl, "events", 2, nil)
	member, _ := joinAndSync(t, cl, "busy")
	ctx := ctxT(t)
	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"busy"}
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r.Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(code))
	}
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "busy"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	if r, err := lv.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, r)
	}
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Groups = []string{"busy"}
	d, err := dr.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := d.Groups[0]; g.ErrorCode != 0 || g.State != "Empty" || len(g.Members) != 0 {
		t.Fatalf("describe empty group: code %d state %s members %d", g.ErrorCode, g.State, len(g.Members))
	}
	if code := del(); code != 0 {
		t.Fatalf("delete empty group: %v", kerr.ErrorForCode(code))
	}
	if code := del(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete deleted group: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
}
