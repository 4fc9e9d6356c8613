package raft

import (
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func TestContractSingleNode(t *testing.T) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		c := newCluster(t, 1)
		cfg := c.config(1)
		// A lone voter cannot lose its quorum: elect it fast.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
		c.openWith(cfg)
		return c.leader()
	})
}

// TestContractClusterLeader runs the contract against the leader of a
// three-voter cluster: every write is replicated to a quorum.
func TestContractClusterLeader(t *testing.T) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		return openCluster(t, 3).leader()
	})
}

// TestContractClusterFollower runs it against a follower: every write,
// read and keep-alive is forwarded to the leader, watches are served
// from the follower's own log.
func TestContractClusterFollower(t *testing.T) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		return openCluster(t, 3).followers()[0]
	})
}
