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

// EnvKeep, set to 1, keeps the topics and groups a run creates on an
// external cluster (the CLI's --keep).
const EnvKeep = "VLTAVA_CONFORMANCE_KEEP"

func TestMain(m *testing.M) { daemontest.Main(m) }

// TestConformance runs every script in testdata against the target named
// by VLTAVA_CONFORMANCE_TARGET, or, when it is unset, against both vltava
// and kfake (so CI holds both to Kafka's semantics). Scenarios whose
// capabilities a target lacks are skipped with the reason.
func TestConformance(t *testing.T) {
	names := []string{"vltava", "kfake"}
	if name := os.Getenv(EnvTarget); name != "" {
		names = []string{name}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) { runTarget(t, name) })
	}
}

func runTarget(t *testing.T, name string) {
	var bin string
	if name == "vltava" {
		bin = daemontest.Build(t)
	}
	tg, err := target.ByName(name, bin, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := target.Describe(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("target %s (%s) capabilities: %s", tg.Name(), desc.Software, desc.Caps)
	suite := New(tg, desc.Caps)
	suite.Keep = os.Getenv(EnvKeep) == "1"
	testscript.Run(t, suite.Params("testdata"))
}
