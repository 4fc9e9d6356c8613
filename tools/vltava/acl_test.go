package main

import (
	"strings"
	"testing"

	"github.com/vltava/vltava/daemon/daemontest"
)

func TestACLAddListRemove(t *testing.T) {
	// The CLI connects on PLAINTEXT as User:ANONYMOUS: the super user here.
	p := daemontest.Start(t, daemontest.Build(t), "--override", "authorizer=acl", "--override", "super.users=User:ANONYMOUS")
	addr := p.Addr()
	out := cli(t, addr, "", "acl", "add", "--principal", "User:alice", "--operation", "read,describe", "--topic", "orders")
	if !strings.Contains(out, "added ALLOW READ on LITERAL TOPIC orders from *") {
		t.Errorf("acl add:\n%s", out)
	}
	cli(t, addr, "", "acl", "add", "--principal", "User:bob", "--operation", "write", "--topic", "logs-", "--pattern", "prefixed", "--deny")
	cli(t, addr, "", "acl", "add", "--principal", "User:bob", "--operation", "cluster_action", "--cluster")
	out = cli(t, addr, "", "acl", "list")
	for _, want := range []string{"User:alice", "orders", "READ", "DESCRIBE", "PREFIXED", "logs-", "DENY", "kafka-cluster", "CLUSTER_ACTION"} {
		if !strings.Contains(out, want) {
			t.Errorf("acl list lacks %q:\n%s", want, out)
		}
	}
	out = cli(t, addr, "", "acl", "list", "--principal", "User:bob", "-o", "json")
	if strings.Contains(out, "alice") || !strings.Contains(out, `"principal":"User:bob"`) {
		t.Errorf("acl list --principal User:bob -o json:\n%s", out)
	}
	out = cli(t, addr, "", "acl", "remove", "--principal", "User:alice", "--topic", "orders")
	if strings.Count(out, "removed ") != 2 {
		t.Errorf("acl remove: want two ACLs removed:\n%s", out)
	}
	if out := cli(t, addr, "", "acl", "list"); strings.Contains(out, "alice") {
		t.Errorf("alice's ACLs survive their removal:\n%s", out)
	}
	if _, errOut, err := cliErr(t, addr, "", "acl", "add", "--principal", "alice", "--operation", "read", "--topic", "x"); err == nil || !strings.Contains(errOut+err.Error(), "INVALID_REQUEST") {
		t.Errorf("a principal without a type was accepted: %v %s", err, errOut)
	}
	if _, _, err := cliErr(t, addr, "", "acl", "remove"); err == nil {
		t.Error("acl remove without a filter succeeded")
	}
}
