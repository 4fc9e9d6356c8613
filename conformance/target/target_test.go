package target

import (
	"strings"
	"testing"
)

func TestParseCaps(t *testing.T) {
	c, err := ParseCaps(" multibroker, replication,,")
	if err != nil || !c["multibroker"] || !c["replication"] || len(c) != 2 {
		t.Fatalf("ParseCaps = %v, %v", c, err)
	}
	if _, err := ParseCaps("multibroker,replicaton,kil9"); err == nil || !strings.Contains(err.Error(), "replicaton,kil9") {
		t.Fatalf("unknown names: err = %v", err)
	}
}

func TestExternalNeedsBootstrap(t *testing.T) {
	env := func(string) string { return "" }
	if _, err := NewExternal(env); err == nil || !strings.Contains(err.Error(), "explicit bootstrap") {
		t.Fatalf("err = %v", err)
	}
}

func TestEveryCapabilityIsKnown(t *testing.T) {
	for _, facts := range []Caps{(&Vltava{}).Facts(), Kfake{}.Facts(), (&External{}).Facts()} {
		for k := range facts {
			if !ValidCap(k) {
				t.Errorf("fact %q is not a known capability", k)
			}
		}
	}
}
