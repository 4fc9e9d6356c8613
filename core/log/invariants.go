package log

import "github.com/vltava/vltava/core/invariant"

// checkOffsetsLocked checks, with the invariants build tag, the order of
// the log's offsets:
//
// INVARIANT: start <= end (the first segment's base <= start after
// retention), recoveryPoint <= syncedOffset <= end, and the segments are in
// base order with the active one starting at or below the written end.
// REQUIRES: l.mu.
func (l *Log) checkOffsetsLocked() {
	if !invariant.Enabled {
		return
	}
	invariant.Check(l.start <= l.end, "log %s: log start %d > log end %d", l.dir, l.start, l.end)
	invariant.Check(l.recoveryPoint <= l.syncedOffset && l.syncedOffset <= l.end,
		"log %s: recovery point %d, synced %d, log end %d out of order", l.dir, l.recoveryPoint, l.syncedOffset, l.end)
	for i := 1; i < len(l.segs); i++ {
		invariant.Check(l.segs[i-1].base < l.segs[i].base, "log %s: segment %d before %d", l.dir, l.segs[i-1].base, l.segs[i].base)
	}
	// With appends awaiting their group commit (groupcommit.go) a roll may
	// have started the active segment at the written end, past the
	// published one.
	invariant.Check(l.end <= l.written, "log %s: log end %d past the written end %d", l.dir, l.end, l.written)
	invariant.Check(len(l.segs) > 0 && l.segs[len(l.segs)-1].base <= l.written,
		"log %s: active segment starts past the written end %d", l.dir, l.written)
}
