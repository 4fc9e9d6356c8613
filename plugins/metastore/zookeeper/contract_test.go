package zookeeper

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

// testSessionTimeout keeps session-expiry subtests short but tolerates a
// loaded machine.
const testSessionTimeout = 2 * time.Second

var chroots atomic.Int64

// openStore opens a store in a fresh chroot of e.
func openStore(t *testing.T, e *zktest.Ensemble, cfg Config) *Store {
	t.Helper()
	if cfg.Connect == "" {
		cfg.Connect = fmt.Sprintf("%s/test/%d", e.Connect(), chroots.Add(1))
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = testSessionTimeout
	}
	s, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func contract(t *testing.T, e *zktest.Ensemble) {
	plugintest.MetadataStore(t, func(t *testing.T) sdk.MetadataStore { return openStore(t, e, Config{}) })
}

func TestContractStandalone(t *testing.T) {
	contract(t, zktest.Start(t, 1))
}

func TestContractEnsemble(t *testing.T) {
	contract(t, zktest.Start(t, 3))
}
