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

// contract runs the contract against c, one key prefix per subtest. etcd
// compaction is cluster-wide, so the compaction subtest gets a member of
// its own: compacting the shared one would cut other subtests' watches.
func contract(t *testing.T, c *etcdtest.Cluster) {
	var n atomic.Int64
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore {
		eps := c.Endpoints()
		if strings.HasSuffix(t.Name(), "/WatchCompacted") {
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
