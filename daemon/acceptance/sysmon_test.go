package acceptance

import (
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/vltava/vltava/daemon/daemontest"
)

// godebugOf is the GODEBUG value of a running process, from its
// environment as it was exec'ed.
func godebugOf(t *testing.T, pid int) string {
	t.Helper()
	p, err := procfs.NewProc(pid)
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	env, err := p.Environ()
	if err != nil {
		t.Fatalf("environment of %d: %v", pid, err)
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return v
		}
	}
	return ""
}

// vltavad re-executes itself so that the Go runtime's sysmon never sleeps
// deeply (daemon/sysmon.go), keeping the GODEBUG settings it was given,
// and VLTAVA_GO_SYSMON=default keeps the runtime's default. Not parallel:
// it sets the environment the brokers inherit.
func TestBrokerKeepsSysmonAwake(t *testing.T) {
	bin := daemontest.Build(t)
	t.Setenv("GODEBUG", "madvdontneed=1")
	p := daemontest.Start(t, bin)
	if got, want := godebugOf(t, p.Pid()), "madvdontneed=1,schedtrace=2147483647"; got != want {
		t.Errorf("GODEBUG of the serving broker %q, want %q", got, want)
	}
	t.Setenv("VLTAVA_GO_SYSMON", "default")
	q := daemontest.Start(t, bin)
	if got := godebugOf(t, q.Pid()); got != "madvdontneed=1" {
		t.Errorf("GODEBUG with VLTAVA_GO_SYSMON=default %q, want it unchanged", got)
	}
}
