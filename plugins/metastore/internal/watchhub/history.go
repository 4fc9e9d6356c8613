package watchhub

import (
	"strings"

	"github.com/vltava/vltava/plugins/sdk"
)

// history is a bounded ring of recent events, oldest first, that lets a
// watch start from a past revision.
//
// INVARIANT: every event added with a revision > compacted is in the
// ring; the ring holds events in revision order.
type history struct {
	buf       []*sdk.WatchEvent // ring storage, len = max events
	start, n  int               // oldest event is buf[start]; n events held
	bytes     int               // sum of value sizes held
	maxBytes  int               // 0: no byte bound
	compacted int64             // highest revision some event of which is gone
}

func newHistory(maxEvents, maxBytes int) history {
	return history{buf: make([]*sdk.WatchEvent, maxEvents), maxBytes: maxBytes}
}

// overBytes reports whether holding extra more value bytes breaks the
// byte bound.
func (h *history) overBytes(extra int) bool {
	return h.maxBytes > 0 && h.bytes+extra > h.maxBytes
}

// add appends ev, evicting the oldest events past either bound. An event
// at or below compacted is not kept (compaction ran ahead of the events).
func (h *history) add(ev *sdk.WatchEvent) {
	if ev.Revision <= h.compacted {
		return
	}
	for h.n > 0 && (h.n == len(h.buf) || h.overBytes(len(ev.Value))) {
		h.dropOldest()
	}
	if h.maxBytes > 0 && len(ev.Value) > h.maxBytes { // cannot be kept at all
		h.compacted = max(h.compacted, ev.Revision)
		return
	}
	h.buf[(h.start+h.n)%len(h.buf)] = ev
	h.n++
	h.bytes += len(ev.Value)
}

func (h *history) dropOldest() {
	ev := h.buf[h.start]
	h.buf[h.start] = nil
	h.start = (h.start + 1) % len(h.buf)
	h.n--
	h.bytes -= len(ev.Value)
	h.compacted = max(h.compacted, ev.Revision)
}

// compact drops events at and below rev.
func (h *history) compact(rev int64) {
	for h.n > 0 && h.buf[h.start].Revision <= rev {
		h.dropOldest()
	}
	h.compacted = max(h.compacted, rev)
}

// reset empties the ring; nothing at or below rev can be replayed.
func (h *history) reset(rev int64) {
	clear(h.buf)
	h.start, h.n, h.bytes, h.compacted = 0, 0, 0, rev
}

// since returns the held events with a revision above rev whose key has
// the prefix, oldest first. The events are shared: callers must not
// modify them.
func (h *history) since(rev int64, prefix string) []*sdk.WatchEvent {
	var out []*sdk.WatchEvent
	for i := range h.n {
		ev := h.buf[(h.start+i)%len(h.buf)]
		if ev.Revision > rev && strings.HasPrefix(ev.Key, prefix) {
			out = append(out, ev)
		}
	}
	return out
}
