package watchhub

import (
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
)

func TestHistoryByteBound(t *testing.T) {
	h := newHistory(100, 10)
	for rev := int64(1); rev <= 5; rev++ {
		h.add(&sdk.WatchEvent{Revision: rev, Value: make([]byte, 4)})
	}
	if h.n != 2 || h.bytes != 8 || h.compacted != 3 {
		t.Fatalf("history holds %d events, %d bytes, compacted %d; want 2, 8, 3", h.n, h.bytes, h.compacted)
	}
	h.add(&sdk.WatchEvent{Revision: 6, Value: make([]byte, 11)}) // too big to hold
	if h.n != 0 || h.compacted != 6 {
		t.Fatalf("after an oversized event: %d events, compacted %d; want 0, 6", h.n, h.compacted)
	}
}

// TestHistoryCountOnly: with no byte bound only the event count evicts,
// and events at or below a compaction that ran ahead are not kept.
func TestHistoryCountOnly(t *testing.T) {
	h := newHistory(3, 0)
	h.compact(2)
	for rev := int64(1); rev <= 6; rev++ {
		h.add(&sdk.WatchEvent{Key: "k", Revision: rev, Value: make([]byte, 1<<20)})
	}
	got := h.since(0, "k")
	if len(got) != 3 || got[0].Revision != 4 || h.compacted != 3 {
		t.Fatalf("held %d events (first %v), compacted %d; want 3 from revision 4, compacted 3", len(got), got, h.compacted)
	}
	if n := len(h.since(0, "other")); n != 0 {
		t.Fatalf("since with a foreign prefix returned %d events", n)
	}
	h.reset(9)
	if h.n != 0 || h.bytes != 0 || h.compacted != 9 {
		t.Fatalf("after reset: %d events, %d bytes, compacted %d; want 0, 0, 9", h.n, h.bytes, h.compacted)
	}
}
