package broker

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster"
	"github.com/vltava/vltava/plugins/sdk"
)

func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// topicConfigOn asks broker id itself (not any broker) for one topic
// config: its value and source.
func topicConfigOn(ctx context.Context, t *testing.T, cl *kgo.Client, id int32, topic, key string) (string, kmsg.ConfigSource) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
	req.Resources = append(req.Resources, res)
	raw, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe configs on broker %d: %+v", id, resp.Resources)
	}
	for _, c := range resp.Resources[0].Configs {
		if c.Name == key && c.Value != nil {
			return *c.Value, c.Source
		}
	}
	t.Fatalf("broker %d: no %s in %+v", id, key, resp.Resources[0].Configs)
	return "", 0
}

// storedReplicas reads the assignment from /topics/<name>.
func storedReplicas(ctx context.Context, t *testing.T, s sdk.MetadataStore, name string) [][]int32 {
	t.Helper()
	resp, err := s.Get(ctx, &sdk.GetRequest{Key: topicsPrefix + name})
	if err != nil {
		t.Fatal(err)
	}
	var rec cluster.TopicRecord
	if err := json.Unmarshal(resp.Value, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Replicas
}

func sameAssignment(a, b [][]int32) bool { return slices.EqualFunc(a, b, slices.Equal) }

// A topic config altered through one broker takes effect on every
// replica (the bug: followers kept the configs they opened the topic
// with), and the write keeps the replica assignment.
func TestClusterAlterConfigsReachesFollowers(t *testing.T) {
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	cl := c.client()
	assignment := [][]int32{{1, 2, 3}, {2, 3, 1}}
	c.createAssigned(ctx, cl, "cfg", assignment)
	leader := c.partitionMeta(1, "cfg", 0).Leader

	// IncrementalAlterConfigs sent to the leader of partition 0.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	for k, v := range map[string]string{"retention.ms": "123456", "min.insync.replicas": "2", "cleanup.policy": "compact"} {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, op)
	}
	req.Resources = append(req.Resources, res)
	raw, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := raw.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("incremental alter: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	for id := int32(1); id <= 3; id++ {
		c.waitFor("broker "+strconv.Itoa(int(id))+" applies the new configs", func() bool {
			for _, p := range c.broker(id).topic("cfg").partitions {
				cfg := p.Config()
				if cfg.RetentionMs != 123456 || cfg.MinInsyncReplicas != 2 || !slices.Equal(cfg.CleanupPolicy, []string{"compact"}) {
					return false
				}
			}
			return true
		})
		if v, src := topicConfigOn(ctx, t, cl, id, "cfg", "retention.ms"); v != "123456" || src != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("broker %d describes retention.ms = %s (source %v), want 123456 from the topic", id, v, src)
		}
	}
	if got := storedReplicas(ctx, t, c.store, "cfg"); !sameAssignment(got, assignment) {
		t.Errorf("stored replicas after alter %v, want %v", got, assignment)
	}

	// AlterConfigs (replace-all) through a follower: retention.ms goes
	// back to the default everywhere, segment.bytes is set everywhere.
	follower := assignment[0][(slices.Index(assignment[0], leader)+1)%3]
	areq := kmsg.NewPtrAlterConfigsRequest()
	ares := kmsg.NewAlterConfigsRequestResource()
	ares.ResourceType, ares.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	ac := kmsg.NewAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "segment.bytes", kmsg.StringPtr("2097152")
	ares.Configs = append(ares.Configs, ac)
	areq.Resources = append(areq.Resources, ares)
	raw, err = cl.Broker(int(follower)).Request(ctx, areq)
	if err != nil {
		t.Fatal(err)
	}
	if r := raw.(*kmsg.AlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("alter: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	def := c.cfgs[1].LogRetentionMs
	for id := int32(1); id <= 3; id++ {
		c.waitFor("every broker applies the replaced configs", func() bool {
			cfg := c.broker(id).topic("cfg").partition(1).Config()
			return cfg.SegmentBytes == 2097152 && cfg.RetentionMs == def && cfg.MinInsyncReplicas == c.cfgs[1].MinInsyncReplicas
		})
	}
	if got := storedReplicas(ctx, t, c.store, "cfg"); !sameAssignment(got, assignment) {
		t.Errorf("stored replicas after the second alter %v, want %v", got, assignment)
	}
	for p, want := range assignment {
		for id := int32(1); id <= 3; id++ {
			if v := c.partitionMeta(id, "cfg", int32(p)); !slices.Equal(v.Replicas, want) {
				t.Errorf("broker %d: cfg-%d replicas %v, want %v", id, p, v.Replicas, want)
			}
		}
	}
}

// ElectLeaders (key 43): after the preferred leader went away and came
// back, a preferred election gives it the leadership again; a second one
// is not needed. Data written meanwhile stays readable.
func TestClusterElectPreferredLeader(t *testing.T) {
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	cl := c.client()
	c.createAssigned(ctx, cl, "el", [][]int32{{1, 2}})
	produceAcksAll(ctx, t, cl, "el", 20)

	c.stop(1) // controlled shutdown: leadership moves to 2
	c.waitFor("broker 2 leads", func() bool { v := c.partitionMeta(2, "el", 0); return v.Leader == 2 })
	c.start(1)
	c.waitFor("broker 1 is back in the ISR", func() bool {
		v := c.partitionMeta(2, "el", 0)
		return v.Leader == 2 && slices.Contains(v.ISR, 1)
	})
	adm := kadm.NewClient(c.client())
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["el"][0]; r.Err != nil {
		t.Fatalf("preferred election: %v %s", r.Err, r.ErrMessage)
	}
	c.waitFor("broker 1 leads again on every broker", func() bool {
		for id := int32(1); id <= 3; id++ {
			if v := c.partitionMeta(id, "el", 0); v == nil || v.Leader != 1 {
				return false
			}
		}
		return true
	})
	rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["el"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Errorf("second preferred election: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	consumeAll(ctx, t, c, "el", 20)
}

// AlterPartitionAssignments (45) moves a partition from {1,2} to {2,3};
// ListPartitionReassignments (46) shows it while in flight, nothing once
// done; the data is intact on the new replicas; DescribeLogDirs (35)
// lists the partitions each broker holds, with sizes; and a config
// change afterwards keeps the new assignment.
func TestClusterReassignmentAndLogDirs(t *testing.T) {
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	cl := c.client()
	adm := kadm.NewClient(cl)
	c.createAssigned(ctx, cl, "ra", [][]int32{{1, 2}})
	const n = 200
	produceAcksAll(ctx, t, cl, "ra", n)

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ra", 0, []int32{2, 3})
	ars, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := ars.Error(); err != nil {
		t.Fatal(err)
	}
	// The new replica joins the ISR only after it fetched and the leader's
	// next ISR check (replica.lag.time.max.ms/4, at most 1s): the
	// reassignment is listed until then.
	ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	inFlight := false
	for _, r := range ls.Sorted() {
		inFlight = true
		if r.Topic != "ra" || r.Partition != 0 || !slices.Equal(r.AddingReplicas, []int32{3}) || !slices.Equal(r.RemovingReplicas, []int32{1}) ||
			!slices.Equal(sortedCopy(r.Replicas), []int32{1, 2, 3}) {
			t.Errorf("listed reassignment %+v, want replicas {1,2,3} adding [3] removing [1]", r)
		}
	}
	if !inFlight {
		// Not an error of the broker: the move finished before the list.
		t.Logf("reassignment finished before it could be listed")
	}
	c.waitFor("the reassignment completes", func() bool {
		ls, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ls.Sorted()) > 0 {
			return false
		}
		for id := int32(1); id <= 3; id++ {
			if v := c.partitionMeta(id, "ra", 0); v == nil || !slices.Equal(v.Replicas, []int32{2, 3}) {
				return false
			}
		}
		return true
	})
	if got := storedReplicas(ctx, t, c.store, "ra"); !sameAssignment(got, [][]int32{{2, 3}}) {
		t.Errorf("stored replicas %v, want [[2 3]]", got)
	}
	v := c.partitionMeta(3, "ra", 0)
	if !slices.Equal(sortedCopy(v.ISR), []int32{2, 3}) || v.Leader != 2 {
		t.Errorf("after the move: leader %d isr %v, want leader 2 isr {2,3}", v.Leader, v.ISR)
	}
	if end := c.broker(3).topic("ra").partition(0).log.EndOffset(); end != n {
		t.Errorf("new replica 3 has log end %d, want %d", end, n)
	}
	consumeAll(ctx, t, c, "ra", n)

	// DescribeLogDirs: brokers 2 and 3 hold ra-0 with the same non-zero
	// size; broker 1 no longer lists it.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		bd, ok := dirs[id]
		if !ok || len(bd) != 1 {
			t.Fatalf("broker %d: log dirs %+v, want one", id, bd)
		}
		for _, d := range bd {
			if d.Err != nil {
				t.Fatalf("broker %d dir %s: %v", id, d.Dir, d.Err)
			}
			if p, ok := d.Topics["ra"][0]; ok {
				sizes[id] = p.Size
				if want := c.broker(id).topic("ra").partition(0).log.Size(); p.Size != want {
					t.Errorf("broker %d: ra-0 size %d, log says %d", id, p.Size, want)
				}
			}
		}
	}
	if _, ok := sizes[1]; ok {
		t.Errorf("broker 1 still lists ra-0 after it was moved away")
	}
	if sizes[2] <= 0 || sizes[3] != sizes[2] {
		t.Errorf("ra-0 sizes %v, want equal and > 0 on brokers 2 and 3", sizes)
	}

	// A config change after the move keeps the new assignment.
	acr, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("600000")}}, "ra")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range acr {
		if r.Err != nil {
			t.Fatalf("alter configs after the move: %v %s", r.Err, r.ErrMessage)
		}
	}
	c.waitFor("broker 3 applies retention.ms", func() bool {
		return c.broker(3).topic("ra").partition(0).Config().RetentionMs == 600000
	})
	if got := storedReplicas(ctx, t, c.store, "ra"); !sameAssignment(got, [][]int32{{2, 3}}) {
		t.Errorf("stored replicas after the config change %v, want [[2 3]]", got)
	}
}
