package main

import (
	"strings"
	"testing"

	"github.com/vltava/vltava/daemon/daemontest"
)

func TestDoctorHealthyBroker(t *testing.T) {
	dir, maddr := t.TempDir(), daemontest.FreePort(t)
	p := daemontest.Start(t, daemontest.Build(t), "--data-dir", dir, "--metrics-listen", maddr)
	cli(t, p.Addr(), "", "topic", "create", "doc", "-p", "2")
	out := cli(t, p.Addr(), "", "doctor", "--data-dir", dir, "--metrics", maddr)
	for _, want := range []string{"controller", "partitions", "descriptors", "disk", "clock skew"} {
		line := lineWith(out, want)
		if !strings.Contains(line, "OK") && !(want == "disk" && strings.Contains(line, "WARN")) {
			t.Errorf("doctor's %s check is not OK: %q\n%s", want, line, out)
		}
	}
	if !strings.Contains(lineWith(out, "partitions"), "2 partitions") {
		t.Errorf("doctor does not count the topic's partitions:\n%s", out)
	}

	// An unreachable metrics listener is a failed check and a failed exit.
	out, _, err := cliErr(t, p.Addr(), "", "doctor", "--metrics", daemontest.FreePort(t))
	if err == nil || !strings.Contains(lineWith(out, "clock skew"), "FAIL") {
		t.Errorf("doctor with an unreachable broker clock: err %v\n%s", err, out)
	}
}

func lineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
