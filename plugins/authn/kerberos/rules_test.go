package kerberos

import (
	"errors"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	rs, err := ParseRules("EXAMPLE.COM", []string{
		`RULE:[1:$1@$0](.*@PARTNER\.COM)s/@.*//L`,
		`RULE:[2:$1@$0](admin@EXAMPLE\.COM)s/.*/root/`,
		`RULE:[2:$1@$0](svc-.*@EXAMPLE\.COM)s/svc-([a-z]*)@.*/app-\1/g`,
		"DEFAULT",
	})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"alice@EXAMPLE.COM":         "alice",
		"kafka/broker1@EXAMPLE.COM": "kafka",
		"Bob@PARTNER.COM":           "bob",
		"admin/ops@EXAMPLE.COM":     "root",
		"svc-etl/host1@EXAMPLE.COM": "app-etl",
		"mallory@ELSEWHERE.ORG":     "",
		"alice/x@PARTNER.COM":       "",
	} {
		name, realm, _ := strings.Cut(in, "@")
		got, err := rs.ShortName(strings.Split(name, "/"), realm)
		if want == "" {
			if !errors.Is(err, ErrNoRule) {
				t.Errorf("%s: %q %v, want ErrNoRule", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s → %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"RULE:", "RULE:[x:$1]", "SOMETHING", `RULE:[1:$1]([)`} {
		if _, err := ParseRules("R", []string{bad}); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
}
