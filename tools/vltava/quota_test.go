package main

import (
	"strings"
	"testing"
)

func TestQuotaSetListRemove(t *testing.T) {
	addr := startVltavad(t)
	cli(t, addr, "", "quota", "set", "--client-id", "etl", "producer_byte_rate=5000000", "consumer_byte_rate=1e7")
	cli(t, addr, "", "quota", "set", "--user-default", "request_percentage=50")
	out := cli(t, addr, "", "quota", "list")
	for _, want := range []string{"etl", "producer_byte_rate", "5000000", "10000000", "<default>", "request_percentage"} {
		if !strings.Contains(out, want) {
			t.Errorf("quota list lacks %q:\n%s", want, out)
		}
	}
	if out := cli(t, addr, "", "quota", "list", "-o", "json"); !strings.Contains(out, `"client_id":"etl"`) || !strings.Contains(out, `"value":5000000`) {
		t.Errorf("quota list -o json:\n%s", out)
	}
	out = cli(t, addr, "", "quota", "list", "--client-id", "etl")
	if strings.Contains(out, "request_percentage") || !strings.Contains(out, "etl") {
		t.Errorf("quota list --client-id etl:\n%s", out)
	}
	cli(t, addr, "", "quota", "remove", "--client-id", "etl", "producer_byte_rate", "consumer_byte_rate")
	if out := cli(t, addr, "", "quota", "list"); strings.Contains(out, "etl") {
		t.Errorf("etl's quotas survive their removal:\n%s", out)
	}
	// Bad input is refused with the broker's reason or a usage error.
	if _, errOut, err := cliErr(t, addr, "", "quota", "set", "--client-id", "x", "bogus_rate=1"); err == nil || !strings.Contains(errOut+err.Error(), "INVALID_REQUEST") {
		t.Errorf("an unknown quota key was accepted: %v %s", err, errOut)
	}
	if _, _, err := cliErr(t, addr, "", "quota", "set", "producer_byte_rate=1"); err == nil {
		t.Error("quota set without an entity succeeded")
	}
}
