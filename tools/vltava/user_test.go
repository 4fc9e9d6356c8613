package main

import (
	"strings"
	"testing"
)

func TestUserAddListRemove(t *testing.T) {
	addr := startVltavad(t)
	if out := cli(t, addr, "s3cret\n", "user", "add", "alice"); !strings.Contains(out, "alice") {
		t.Errorf("user add printed %q", out)
	}
	cli(t, addr, "bobpw\n", "user", "add", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096")
	out := cli(t, addr, "", "user", "list")
	for _, want := range []string{"alice  SCRAM-SHA-256  8192", "alice  SCRAM-SHA-512  8192", "bob    SCRAM-SHA-512  4096"} {
		if !strings.Contains(out, want) {
			t.Errorf("user list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Error("user list shows a password")
	}
	cli(t, addr, "", "user", "remove", "alice")
	if out := cli(t, addr, "", "user", "list"); strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("after removing alice:\n%s", out)
	}
	if _, errOut, err := cliErr(t, addr, "", "user", "remove", "alice"); err == nil || !strings.Contains(errOut+err.Error(), "RESOURCE_NOT_FOUND") {
		t.Errorf("removing a missing user: %v %s", err, errOut)
	}
	if _, _, err := cliErr(t, addr, "", "user", "add", "carol"); err == nil {
		t.Error("user add without a password on stdin succeeded")
	}
	if _, errOut, err := cliErr(t, addr, "pw\n", "user", "add", "carol", "--iterations", "100"); err == nil {
		t.Errorf("100 iterations accepted: %s", errOut)
	}
}
