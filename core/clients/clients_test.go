package clients

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRegistryAggregatesPerSoftware(t *testing.T) {
	r := New()
	a := r.Open()
	a.Used(18, 3, "app")
	a.Named("kgo", "1.0")
	a.Used(18, 3, "app")
	a.Used(0, 9, "app")
	a.Used(0, 9, "app")
	a.Used(1, 13, "app")

	b := r.Open()
	b.Named("kgo", "1.0")
	b.Used(0, 8, "other-app")

	old := r.Open() // never names itself
	old.Used(3, 1, "legacy")

	got := r.Snapshot()
	if len(got) != 2 {
		t.Fatalf("software entries: %+v", got)
	}
	kgo, unk := got[0], got[1]
	if kgo.Name != "kgo" || unk.Software != Unknown {
		t.Fatalf("order/naming: %+v", got)
	}
	if diff := cmp.Diff(map[int16][]int16{0: {8, 9}, 1: {13}, 18: {3}}, kgo.APIs); diff != "" {
		t.Errorf("kgo APIs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"app", "other-app"}, kgo.ClientIDs); diff != "" {
		t.Errorf("client ids: %s", diff)
	}
	if kgo.Connections != 2 || kgo.Total != 2 || unk.Connections != 1 {
		t.Errorf("connections: kgo %d/%d unknown %d", kgo.Connections, kgo.Total, unk.Connections)
	}
	a.Closed()
	a.Closed() // idempotent
	if got := r.Snapshot()[0]; got.Connections != 1 || got.Total != 2 {
		t.Errorf("after a close: %d open, %d total", got.Connections, got.Total)
	}

	only, also := Affected(r.Snapshot(), 0, 9)
	if len(only) != 0 || len(also) != 1 || also[0].Name != "kgo" {
		t.Errorf("Affected(Produce v9): only %v also %v", only, also)
	}
	only, _ = Affected(r.Snapshot(), 3, 1)
	if len(only) != 1 || only[0].Software != Unknown {
		t.Errorf("Affected(Metadata v1): only %v", only)
	}
}

func TestRegistryIsBounded(t *testing.T) {
	r := New()
	for i := range MaxSoftware + 50 {
		c := r.Open()
		c.Named(fmt.Sprintf("lib%d", i), "1")
		for j := range MaxClientIDs + 10 {
			c.Used(0, 9, fmt.Sprintf("id%d", j))
		}
	}
	got := r.Snapshot()
	if len(got) > MaxSoftware+1 {
		t.Errorf("%d software entries kept", len(got))
	}
	for _, u := range got {
		if len(u.ClientIDs) > MaxClientIDs {
			t.Fatalf("%s keeps %d client ids", u.Name, len(u.ClientIDs))
		}
	}
}

func TestRepeatedUseTakesNoLock(t *testing.T) {
	r := New()
	c := r.Open()
	c.Named("kgo", "1")
	c.Used(0, 9, "app")
	if n := testing.AllocsPerRun(1000, func() { c.Used(0, 9, "app") }); n != 0 {
		t.Errorf("a repeated request allocates %v", n)
	}
}
