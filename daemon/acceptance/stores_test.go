package acceptance

import (
	"maps"
	"os"
	"slices"
	"testing"

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
	if testing.Short() {
		t.Skip("cluster tests start several daemons; skipped with -short")
	}
	cfg := maps.Clone(extra)
	if cfg == nil {
		cfg = map[string]string{}
	}
	switch store {
	case "raft":
		return startCluster(t, n, cfg)
	case "zookeeper":
		e := zktest.Start(t, 1)
		cfg["metadata.store"] = "zookeeper"
		cfg["zookeeper.connect"] = e.Connect() + "/vltava"
	case "etcd":
		e := etcdtest.Start(t, 1)
		cfg["metadata.store"] = "etcd"
		cfg["metadata.store.config.endpoints"] = e.Endpoints()
		cfg["metadata.store.config.prefix"] = "/vltava"
	default:
		t.Fatalf("unknown metadata store %q (want one of %v)", store, metadataStores)
	}
	if !slices.Contains(metadataStores, store) {
		t.Fatalf("unknown store %q", store)
	}
	return startClusterWith(t, daemontest.ClusterOptions{Brokers: n, ExternalStore: true}, cfg)
}
