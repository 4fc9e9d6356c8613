package fdlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vltava/vltava/core/config"
)

func TestNeedDoesNotGrowWithPartitions(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.LogDirs = t.TempDir()
	base, _ := Need(cfg)
	for _, name := range []string{"a-0", "a-1", "b.c-12", "meta", "not_a_partition"} {
		if err := os.MkdirAll(filepath.Join(cfg.LogDirs, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := Partitions(cfg); got != 3 {
		t.Errorf("Partitions = %d, want 3", got)
	}
	if got, how := Need(cfg); got != base || !strings.Contains(how, "3 partitions") {
		t.Errorf("need = %d (%s), want %d whatever the partitions", got, how, base)
	}
	cfg.SaslAuthenticators = "a,b"
	if got, _ := Need(cfg); got != base+2*2*fdsPerPlugin {
		t.Errorf("two more plugins: need %d, want %d", got, base+2*2*fdsPerPlugin)
	}
}
