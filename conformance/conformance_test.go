package conformance

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/vltava/vltava/conformance/target"
	"github.com/vltava/vltava/daemon/daemontest"
)

// EnvTarget picks the target of 'go test ./conformance' (default vltava).
const EnvTarget = "VLTAVA_CONFORMANCE_TARGET"

func TestMain(m *testing.M) { daemontest.Main(m) }

// TestConformance runs every script in testdata against the target named
// by VLTAVA_CONFORMANCE_TARGET. Scenarios whose capabilities the target
// lacks are skipped with the reason.
func TestConformance(t *testing.T) {
	name := os.Getenv(EnvTarget)
	if name == "" {
		name = "vltava"
	}
	var bin string
	if name == "vltava" {
		bin = daemontest.Build(t)
	}
	tg, err := target.ByName(name, bin, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := target.Probe(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("target %s capabilities: %s", tg.Name(), caps)
	testscript.Run(t, New(tg, caps).Params("testdata"))
}
