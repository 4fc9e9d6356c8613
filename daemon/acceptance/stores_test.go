package acceptance

import (
	"context"
	"errors"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/vltava/vltava/daemon/daemontest"
	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
)

// The metadata stores the cluster tests run against: the brokers' own
// raft quorum, and an external ZooKeeper or etcd that the test starts
// (Debian packages zookeeper and etcd-server; the subtest skips, naming
// the package, when the server is missing).
var metadataStores = []string{"raft", "zookeeper", "etcd"}

// storeMatrix reports whether every store-parameterised test runs on
// every store (VLTAVA_STORE_MATRIX=1); by default only the
// representative failover test (TestReplicationLeaderKill9) does, and
// the others run on raft.
func storeMatrix() bool { return os.Getenv("VLTAVA_STORE_MATRIX") != "" }

// forEachStore runs fn once per store as subtests named after it: every
// store for representative tests, else raft unless VLTAVA_STORE_MATRIX
// is set.
func forEachStore(t *testing.T, representative bool, fn func(t *testing.T, store string)) {
	stores := metadataStores
	if !representative && !storeMatrix() {
		stores = stores[:1]
	}
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { fn(t, store) })
	}
}

// startStoreCluster is startCluster on the named metadata store: raft
// runs the quorum among the brokers (--quorum-voters); zookeeper and etcd
// start a one-node server and point every broker at it, no quorum flags.
func startStoreCluster(t *testing.T, store string, n int, extra map[string]string) *daemontest.Cluster {
	t.Helper()
	c, _ := startStoreEnsemble(t, store, n, 1, extra)
	return c
}

// storeServers is the external store of a cluster test: its members can
// be killed (kill -9) and the leader found.
type storeServers interface {
	Leader() int
	Kill(i int)
}

// startStoreEnsemble is startStoreCluster with a store of members servers
// (zookeeper, etcd), returned so the test can kill them.
func startStoreEnsemble(t *testing.T, store string, n, members int, extra map[string]string) (*daemontest.Cluster, storeServers) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests start several daemons; skipped with -short")
	}
	cfg := maps.Clone(extra)
	if cfg == nil {
		cfg = map[string]string{}
	}
	var servers storeServers
	switch store {
	case "raft":
		return startCluster(t, n, cfg), nil
	case "zookeeper":
		e := zktest.Start(t, members)
		cfg["metadata.store"] = "zookeeper"
		cfg["zookeeper.connect"] = e.Connect() + "/vltava"
		servers = e
	case "etcd":
		e := etcdtest.Start(t, members)
		cfg["metadata.store"] = "etcd"
		cfg["metadata.store.config.endpoints"] = e.Endpoints()
		cfg["metadata.store.config.prefix"] = "/vltava"
		servers = e
	default:
		t.Fatalf("unknown metadata store %q (want one of %v)", store, metadataStores)
	}
	return startClusterWith(t, daemontest.ClusterOptions{Brokers: n, ExternalStore: true}, cfg), servers
}

// TestStoreMemberKill9: with the metadata in a three-server ZooKeeper
// ensemble or etcd cluster, kill -9 the store's leader; the cluster keeps
// electing partition leaders (a broker is killed too) and accepting
// metadata changes (a topic is created), and no acknowledged write is
// lost.
func TestStoreMemberKill9(t *testing.T) {
	for _, store := range metadataStores[1:] {
		t.Run(store, func(t *testing.T) {
			c, servers := startStoreEnsemble(t, store, 3, 3, nil)
			const topic = "member-kill"
			createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
			log := &ackLog{acked: map[string]int64{}}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			done := make(chan struct{})
			go func() { defer close(done); produceLoop(ctx, t, c, topic, log) }()
			time.Sleep(500 * time.Millisecond)
			var victim int
			waitUntil(t, 30*time.Second, "a store leader", func() error {
				if victim = servers.Leader(); victim < 0 {
					return errors.New("no leader")
				}
				return nil
			})
			t.Logf("SIGKILL %s server %d (the leader)", store, victim)
			servers.Kill(victim)
			leader := waitLeader(t, c, topic, 0, 0)
			t.Logf("SIGKILL partition leader broker %d", leader)
			c.Broker(leader).Kill9()
			waitLeader(t, c, topic, 0, leader)
			createReplicated(t, c, "created-after", 2, 2, nil) // RF 2: one broker is down
			c.Broker(leader).Restart(t)
			waitISR(t, c, topic, 0, 3)
			time.Sleep(500 * time.Millisecond)
			stop()
			<-done
			checkAcked(t, log, readAllValues(t, c, topic, 0))
		})
	}
}
