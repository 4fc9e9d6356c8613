package fdlimit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vltava/vltava/core/config"
)

func TestNeedCountsPartitions(t *testing.T) {
	cfg := config.DefaultBroker()
	cfg.LogDirs = t.TempDir()
	base, _ := Need(cfg)
	for _, name := range []string{"a-0", "a-1", "b.c-12", "meta", "not_a_partition"} {
		if err := os.MkdirAll(filepath.Join(cfg.LogDirs, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, how := Need(cfg); got != base+3*PerPartition {
		t.Errorf("need = %d (%s), want %d + 3 partitions", got, how, base)
	}
}
