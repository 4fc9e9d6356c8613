package log

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/record"
)

// leaderEpochFile is the leader-epoch checkpoint (layout in doc.go).
const leaderEpochFile = "leader-epoch-checkpoint"

// leaderEpochVersion is the only version of the checkpoint's text format.
const leaderEpochVersion = 0

// epochEntry says that epoch's first offset in the log is start.
type epochEntry struct {
	epoch int32
	start int64
}

// epochCache is the in-memory leader-epoch cache with its checkpoint
// file, following Kafka's LeaderEpochFileCache.
//
// INVARIANT: entries strictly increase in both epoch and start.
//
// Lock order: writeMu, then mu. Readers take only mu; writers take
// writeMu for the whole change including the file write, so the file is
// written in the order of the changes and readers never wait for I/O.
type epochCache struct {
	dir     string
	writeMu sync.Mutex
	mu      sync.RWMutex
	entries []epochEntry // guarded by mu; replaced, never modified in place
	// unsynced says entries end with one the file lacks, added by
	// assignAtEnd; the next update writes the file even if it changes
	// nothing. Guarded by writeMu.
	unsynced bool
}

// snapshot returns the current entries (shared; do not modify).
func (c *epochCache) snapshot() []epochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.entries
}

// latest returns the last entry.
func (c *epochCache) latest() (epochEntry, bool) {
	es := c.snapshot()
	if len(es) == 0 {
		return epochEntry{}, false
	}
	return es[len(es)-1], true
}

// assignEntries applies Kafka's assign rule to es: an entry for a new
// epoch, or an earlier start for the latest epoch, is appended after
// removing every trailing entry that would break monotonicity (epoch or
// start not below the new entry's). It reports whether es changed.
func assignEntries(es []epochEntry, epoch int32, start int64) ([]epochEntry, bool) {
	if epoch < 0 || start < 0 {
		return es, false
	}
	if n := len(es); n > 0 && es[n-1].epoch == epoch && es[n-1].start <= start {
		return es, false
	}
	out := slices.Clone(es)
	for len(out) > 0 {
		last := out[len(out)-1]
		if last.epoch < epoch && last.start < start {
			break
		}
		out = out[:len(out)-1]
	}
	return append(out, epochEntry{epoch: epoch, start: start}), true
}

// truncateEntriesFromEnd drops the entries starting at or after end.
func truncateEntriesFromEnd(es []epochEntry, end int64) []epochEntry {
	i := len(es)
	for i > 0 && es[i-1].start >= end {
		i--
	}
	return es[:i:i]
}

// truncateEntriesFromStart drops the entries wholly below start: the last
// entry starting at or below start is kept, moved to start.
func truncateEntriesFromStart(es []epochEntry, start int64) []epochEntry {
	i := 0
	for i < len(es) && es[i].start <= start {
		i++
	}
	if i == 0 || (i == 1 && es[0].start == start) {
		return es
	}
	out := make([]epochEntry, 0, len(es)-i+1)
	out = append(out, epochEntry{epoch: es[i-1].epoch, start: start})
	return append(out, es[i:]...)
}

// endOffsetFor answers KIP-101's OffsetForLeaderEpoch for requested over
// es, given the log end offset leo. See Log.EndOffsetForEpoch.
func endOffsetFor(es []epochEntry, requested int32, leo int64) (int32, int64) {
	if requested < 0 || len(es) == 0 {
		return -1, -1
	}
	if es[len(es)-1].epoch == requested {
		return requested, leo
	}
	// First entry with an epoch above the requested one.
	hi := sort.Search(len(es), func(i int) bool { return es[i].epoch > requested })
	if hi == len(es) {
		return -1, -1 // above every known epoch
	}
	if hi == 0 {
		return requested, es[0].start // below every known epoch
	}
	return es[hi-1].epoch, es[hi].start
}

// update applies fn to the entries and, if they changed, persists them
// before publishing. On a write error the in-memory cache is unchanged.
func (c *epochCache) update(fn func([]epochEntry) ([]epochEntry, bool)) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	es, changed := fn(c.snapshot())
	if !changed && !c.unsynced {
		return nil
	}
	if invariant.Enabled {
		// INVARIANT: entries strictly increase in both epoch and start.
		for i := 1; i < len(es); i++ {
			invariant.Check(es[i].epoch > es[i-1].epoch && es[i].start > es[i-1].start,
				"log %s: leader epoch cache entry %+v after %+v", c.dir, es[i], es[i-1])
		}
	}
	if err := writeFileAtomic(c.dir, leaderEpochFile, encodeLeaderEpochs(es), true); err != nil {
		return err
	}
	c.unsynced = false
	c.mu.Lock()
	c.entries = es
	c.mu.Unlock()
	return nil
}

// assignAtEnd is assign for an epoch that starts at end, the log end
// offset: no batch is of that epoch yet, and Open drops entries at or
// past the log end, so the file need not have the entry until a batch
// does. It is added in memory only when that is all the change is (the
// entries the file has before end stay as they are); the first update
// after it (the append of the epoch's first batch assigns it again)
// writes the file before the batch. A leader of a new partition so
// writes nothing when it takes over: 10,000 partitions created at once
// cost no 10,000 fsyncs. Otherwise it is assign.
func (c *epochCache) assignAtEnd(epoch int32, end int64) error {
	c.writeMu.Lock()
	old := c.snapshot()
	es, changed := assignEntries(old, epoch, end)
	kept := truncateEntriesFromEnd(old, end)
	lazy := changed && len(es) == len(kept)+1 && slices.Equal(es[:len(kept)], kept) && es[len(kept)] == (epochEntry{epoch, end})
	if lazy {
		c.unsynced = true
		c.mu.Lock()
		c.entries = es
		c.mu.Unlock()
	}
	c.writeMu.Unlock()
	if lazy || !changed {
		return nil
	}
	return c.assign(epoch, end)
}

func (c *epochCache) assign(epoch int32, start int64) error {
	return c.update(func(es []epochEntry) ([]epochEntry, bool) { return assignEntries(es, epoch, start) })
}

func (c *epochCache) truncateFromEnd(end int64) error {
	return c.update(func(es []epochEntry) ([]epochEntry, bool) {
		out := truncateEntriesFromEnd(es, end)
		return out, len(out) != len(es)
	})
}

func (c *epochCache) truncateFromStart(start int64) error {
	return c.update(func(es []epochEntry) ([]epochEntry, bool) {
		out := truncateEntriesFromStart(es, start)
		return out, !slices.Equal(out, es)
	})
}

func (c *epochCache) clear() error {
	return c.update(func(es []epochEntry) ([]epochEntry, bool) { return nil, len(es) > 0 })
}

// assignHeaders assigns the epochs of batches as Append and AppendReplica
// do: each batch with an epoch other than the latest starts an entry.
func (c *epochCache) assignHeaders(hs []record.Header) error {
	return c.update(func(es []epochEntry) ([]epochEntry, bool) {
		changed := false
		for _, h := range hs {
			var ch bool
			es, ch = assignEntries(es, h.PartitionLeaderEpoch, h.BaseOffset)
			changed = changed || ch
		}
		return es, changed
	})
}

// encodeLeaderEpochs writes Kafka's leader-epoch-checkpoint text.
func encodeLeaderEpochs(es []epochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", leaderEpochVersion, len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return b.Bytes()
}

// decodeLeaderEpochs parses a leader-epoch-checkpoint. Anything but the
// exact format with monotonic entries wraps record.ErrCorrupt.
func decodeLeaderEpochs(b []byte) ([]epochEntry, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("log: %s: %w: %s", leaderEpochFile, record.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	text, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return nil, bad("missing final newline")
	}
	lines := strings.Split(text, "\n")
	if len(lines) < 2 || lines[0] != strconv.Itoa(leaderEpochVersion) {
		return nil, bad("bad version line")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, bad("count %q for %d entries", lines[1], len(lines)-2)
	}
	es := make([]epochEntry, 0, n)
	for _, ln := range lines[2:] {
		f := strings.Split(ln, " ")
		if len(f) != 2 {
			return nil, bad("entry %q", ln)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, bad("entry %q", ln)
		}
		e := epochEntry{epoch: int32(ep), start: off}
		if k := len(es); k > 0 && (es[k-1].epoch >= e.epoch || es[k-1].start >= e.start) {
			return nil, bad("entry %q not above the previous one", ln)
		}
		es = append(es, e)
	}
	return es, nil
}

// readLeaderEpochs reads the checkpoint in dir. A missing file matches
// os.ErrNotExist.
func readLeaderEpochs(dir string) ([]epochEntry, error) {
	b, err := os.ReadFile(filepath.Join(dir, leaderEpochFile))
	if err != nil {
		return nil, err
	}
	return decodeLeaderEpochs(b)
}
