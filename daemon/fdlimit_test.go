package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vltava/vltava/daemon/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

// TestRefusesToStartWithTooFewDescriptors runs vltavad under `ulimit -n`
// too low for its partitions: it must refuse with the numbers and the
// fix, not start and die later with EMFILE.
func TestRefusesToStartWithTooFewDescriptors(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh (Debian package dash)")
	}
	bin := daemontest.Build(t)
	dir := t.TempDir()
	// 600 partition directories, as a broker that already holds them would
	// have; they do not raise the need, but 256 descriptors are short of
	// the fixed half for listeners, plugins and connections.
	for i := range 600 {
		if err := os.MkdirAll(filepath.Join(dir, "t-"+strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A broker that wrongly starts is killed after a while, and fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, bin,
		"--data-dir", dir, "--listen", daemontest.FreePort(t), "--metrics-listen=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("vltavad started with 256 descriptors:\n%s", out.String())
	}
	for _, want := range []string{"not enough file descriptors", "600 partitions", "RLIMIT_NOFILE allows 256", "ulimit -n", "LimitNOFILE="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out.String())
		}
	}
}
