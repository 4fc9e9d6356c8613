package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

// contract runs the contract against c, one key prefix per subtest. Two
// subtests get an etcd of their own, because what they check is
// cluster-wide in etcd while the subtests run in parallel:
//
//   - WatchCompacted: compacting the shared etcd would cut other
//     subtests' watches.
//   - SessionRevoke: it checks that revoking a session without keys
//     leaves the store's revision where it was, and etcd's revision
//     counts every write of the cluster: a lease of a parallel subtest
//     expiring in between (SessionExpiry, SessionKeepAlive delete their
//     keys when it does) moved it, and the subtest failed now and then,
//     mostly under -race, where the subtests overlap longest.
func contract(t *testing.T, c *etcdtest.Cluster) {
	var n atomic.Int64
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		eps := c.Endpoints()
		if strings.HasSuffix(t.Name(), "/WatchCompacted") || strings.HasSuffix(t.Name(), "/SessionRevoke") {
			eps = etcdtest.Start(t, 1).Endpoints()
		}
		s, err := Open(context.Background(), Config{Endpoints: eps, Prefix: fmt.Sprintf("/contract/%d", n.Add(1))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestContractOneMember(t *testing.T) {
	contract(t, etcdtest.Start(t, 1))
}

func TestContractThreeMembers(t *testing.T) {
	contract(t, etcdtest.Start(t, 3))
}
