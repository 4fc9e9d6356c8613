package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/sdk"
)

// TestReplicaFetchNeedsClusterAction: with authorizer: acl a follower's
// fetches carry the broker's principal (User:ANONYMOUS on PLAINTEXT) and
// are refused without CLUSTER_ACTION on the cluster; granting it (or
// naming the principal in super.users) lets replication resume.
func TestReplicaFetchNeedsClusterAction(t *testing.T) {
	c := startInProcCluster(t, 2, func(cfg *config.Broker) {
		cfg.Authorizer = "acl"
		cfg.SuperUsers = "User:admin"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	put := func(bs ...acl.Binding) {
		for _, b := range bs {
			if _, err := c.store.Put(ctx, &sdk.PutRequest{Key: b.Key(), Value: acl.Encode(b), ExpectVersion: sdk.AnyVersion}); err != nil {
				t.Fatal(err)
			}
		}
		c.waitFor("every broker holds the ACLs", func() bool {
			for _, br := range c.brokers() {
				if len(br.authz.Bindings()) < len(bs) {
					return false
				}
			}
			return true
		})
	}
	client := []acl.Binding{
		allowACL(rtCluster, kmsg.ACLResourcePatternTypeLiteral, acl.ClusterName, "ANONYMOUS", opCreate),
		allowACL(rtTopic, kmsg.ACLResourcePatternTypeLiteral, "r", "ANONYMOUS", kmsg.ACLOperationAll),
	}
	put(client...)
	cl := c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("r"))
	c.createAssigned(ctx, cl, "r", [][]int32{{1, 2}})
	leader := c.partitionMeta(1, "r", 0).Leader
	follower := int32(3) - leader
	for range 3 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	end := func(id int32) int64 { return c.broker(id).topic("r").partition(0).log.EndOffset() }
	if got := end(leader); got != 3 {
		t.Fatalf("leader log end %d, want 3", got)
	}
	// The follower fetches every ReplicaFetchWaitMaxMs (50 ms): a second
	// is many refused rounds.
	time.Sleep(time.Second)
	if got := end(follower); got != 0 {
		t.Fatalf("follower %d replicated %d records without CLUSTER_ACTION", follower, got)
	}
	put(append(client, allowACL(rtCluster, kmsg.ACLResourcePatternTypeLiteral, acl.ClusterName, "ANONYMOUS", opClusterAction))...)
	c.waitFor("the follower replicates once granted CLUSTER_ACTION", func() bool { return end(follower) == 3 })
}
