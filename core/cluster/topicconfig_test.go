package cluster

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterTopicConfigs through one Node reaches every Node's TopicApplier,
// and the replica assignment (also after a reassignment rewrote it) is
// written back unchanged.
func TestAlterTopicConfigsReachesEveryNodeAndKeepsReplicas(t *testing.T) {
	c := localCluster(t, 3, nil)
	n := c.node(2)
	created, err := n.CreateTopic(ctxT(t), "cfg", 2, 2, [][]int32{{1, 2}, {2, 3}}, map[string]string{"segment.bytes": "1048576"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		eventually(t, "every node hears the new topic", func() bool {
			got, ok := c.rec(id).topic("cfg")
			return ok && got.Version == created.Version
		})
	}
	// Start moving partition 1 from {2,3} to {3,1}: the controller
	// rewrites the replicas to target + removing while it is in flight.
	tp := TopicPartition{"cfg", 1}
	if errs := n.AlterReassignments(ctxT(t), map[TopicPartition][]int32{tp: {3, 1}}); errs[tp] != nil {
		t.Fatal(errs)
	}
	c.partition(tp, "the reassignment starts", func(st PartitionState, r []int32) bool {
		return st.Reassigning() && slices.Equal(r, []int32{3, 1, 2})
	})
	before, ok := n.Topic("cfg")
	if !ok {
		t.Fatal("topic not in the view")
	}
	altered, err := c.node(1).AlterTopicConfigs(ctxT(t), "cfg", func(cur map[string]string) (map[string]string, error) {
		if cur["segment.bytes"] != "1048576" {
			t.Errorf("edit saw %v, want the stored overrides", cur)
		}
		cur["retention.ms"] = "12345"
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"segment.bytes": "1048576", "retention.ms": "12345"}
	for _, id := range []int32{1, 2, 3} {
		eventually(t, "every node hears the altered configs", func() bool {
			got, ok := c.rec(id).topic("cfg")
			return ok && got.Version == altered.Version && maps.Equal(got.Configs, want)
		})
		got, _ := c.rec(id).topic("cfg")
		if !slices.EqualFunc(got.Replicas, before.Replicas, slices.Equal) || got.ID != before.ID || got.Partitions != 2 {
			t.Errorf("node %d: record after alter %+v, want replicas %v id %s", id, got.TopicRecord, before.Replicas, before.ID)
		}
	}
	// The reassignment still completes once the new replica is in sync.
	st, _, _ := n.Partition("cfg", 1)
	if _, err := c.node(st.Leader).AlterISR(ctxT(t), "cfg", 1, st.LeaderEpoch, []int32{2, 3, 1}, st.Version); err != nil {
		t.Fatal(err)
	}
	c.partition(tp, "the reassignment completes", func(st PartitionState, r []int32) bool {
		return !st.Reassigning() && slices.Equal(r, []int32{3, 1})
	})
	if got, _ := n.Topic("cfg"); !maps.Equal(got.Configs, want) {
		t.Errorf("configs after the reassignment finished: %v, want %v", got.Configs, want)
	}
	// An error from edit writes nothing.
	prev, err := n.getTopic(ctxT(t), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.AlterTopicConfigs(ctxT(t), "cfg", func(map[string]string) (map[string]string, error) {
		return nil, kerr.InvalidConfig
	})
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("edit error: got %v", err)
	}
	if now, _ := c.node(1).getTopic(ctxT(t), "cfg"); now.Version != prev.Version {
		t.Errorf("a failed edit wrote the topic (version %d -> %d)", prev.Version, now.Version)
	}
	if _, err := n.AlterTopicConfigs(ctxT(t), "nope", func(m map[string]string) (map[string]string, error) { return m, nil }); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: got %v", err)
	}
}
