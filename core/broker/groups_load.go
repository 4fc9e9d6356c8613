package broker

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/core/group"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/record"
)

// The group coordinator follows the leadership of __consumer_offsets
// partitions, as Kafka's does:
//
//   - When this broker becomes leader of a partition (or leader again at
//     a newer leader epoch), the coordinator begins loading it: its
//     groups answer COORDINATOR_LOAD_IN_PROGRESS while the loader
//     goroutine replays the partition, from its log start to its log end
//     (Kafka reads up to the leader's log end, not the high watermark: as
//     leader this log is the truth, and a commit acknowledged by the
//     previous leader may lie above the HW this leader has learnt so far).
//     The end is read again at each chunk, and the load is abandoned as
//     soon as the partition's leadership or epoch changes. The loaded
//     groups are served once the high watermark has reached the end read,
//     so nothing a client sees can vanish in a further failover (Kafka's
//     coordinator runtime serves reads at the high watermark likewise);
//     the new leader's HW gets there with its followers' next fetches.
//   - When it stops leading the partition, the partition's groups are
//     unloaded: their timers stop with them, waiting requests get
//     NOT_COORDINATOR, and every group API answers NOT_COORDINATOR, so a
//     later re-election replays from the log alone, never on top of
//     stale state.
//
// syncLocked compares leadership with the coordinator's ownership at the
// start of every step (request or timer) and whenever the cluster applier
// kicks the loader, so no request and no timer is served from a partition
// this broker no longer leads. FindCoordinator is unaffected: it answers
// with the partition's leader.

// groupLoadHook, when set by a test, runs in the loader before it reads
// a partition, to widen the loading window.
var groupLoadHook atomic.Pointer[func(partition int32)]

// groupLoadHWHook, when set by a test, replaces the high watermark the
// loader sees (given the partition and its real one).
var groupLoadHWHook atomic.Pointer[func(partition int32, hw int64) int64]

// errLoadAbandoned stops a load whose partition's leadership moved.
var errLoadAbandoned = errors.New("broker: coordinator load abandoned: leadership changed")

// leadsAt reports whether this broker leads p, and at which leader epoch.
// leadsAt, loadedHW and hwChangedOf are the only places the group
// coordinator reads a partition's replication state.
func leadsAt(p *partition) (epoch int32, leader bool) {
	st := p.State() // one consistent snapshot of role and view
	return st.View.LeaderEpoch, st.Role == part.Leader
}

// loadedHW is p's high watermark as the loader sees it.
func loadedHW(p *partition) int64 {
	hw := p.HighWatermark()
	if hook := groupLoadHWHook.Load(); hook != nil {
		hw = (*hook)(p.index, hw)
	}
	return hw
}

// hwChangedOf is closed the next time p's high watermark advances.
func hwChangedOf(p *partition) <-chan struct{} { return p.HWChanged() }

// kick wakes the loader: the leadership of a __consumer_offsets partition
// may have changed. Safe on a nil host (before startGroups).
func (h *groupHost) kick() {
	if h == nil {
		return
	}
	select {
	case h.loadCh <- struct{}{}:
	default:
	}
}

// syncLocked brings the coordinator's ownership in line with this
// broker's leadership of __consumer_offsets: it unloads partitions no
// longer led (or led at another epoch than they were loaded at) and
// begins loading those newly led. A partition with an empty log is loaded
// at once; others are left to the loader. It returns the replies for
// requests that waited on unloaded groups. h.mu must be held.
func (h *groupHost) syncLocked(now time.Time) []group.Reply {
	var replies []group.Reply
	t := h.b.topic(offsetsTopic)
	leads := func(i int32) (int32, bool) {
		if t == nil || t.partition(i) == nil {
			return 0, false
		}
		return leadsAt(t.partition(i))
	}
	for _, i := range h.c.OwnedPartitions() {
		if e, ok := leads(i); !ok || e != h.c.Ownership(i).Epoch {
			out := h.c.Unload(now, i)
			replies = append(replies, out.Replies...)
			delete(h.loads, i)
			h.b.logger.Info("broker: group coordinator unloaded a partition", "partition", fmt.Sprintf("%s-%d", offsetsTopic, i),
				"groups_waiting", len(out.Replies))
		}
	}
	if t == nil {
		return replies
	}
	for i := range int32(len(t.partitions)) {
		e, ok := leads(i)
		if !ok || h.c.Ownership(i).Owned() {
			continue
		}
		l, out := h.c.BeginLoad(now, i, e)
		replies = append(replies, out.Replies...)
		if p := t.partition(i); p.log.StartOffset() >= p.log.EndOffset() {
			h.c.FinishLoad(now, l) // nothing to read
			continue
		}
		h.loads[i] = l
		h.kick()
	}
	return replies
}

// loadRetry is how long the loader waits before it tries a load that
// failed to read the log again.
const loadRetry = time.Second

// loader runs the loads syncLocked begins, until the broker stops. A load
// that fails to read leaves its partition loading (its groups answer
// COORDINATOR_LOAD_IN_PROGRESS, never partial state) and is tried again.
func (h *groupHost) loader() {
	retry := time.NewTimer(loadRetry)
	defer retry.Stop()
	retry.Stop()
	for {
		select {
		case <-h.b.stopCh:
			return
		case <-h.loadCh:
		case <-retry.C:
		}
		h.mu.Lock()
		replies := h.syncLocked(time.Now())
		h.mu.Unlock()
		deliver(replies)
		if err := h.loadPending(); err != nil {
			h.b.logger.Error("broker: group coordinator load", "err", err)
			retry.Reset(loadRetry)
		}
	}
}

// loadPending replays every partition waiting to load, each outside h.mu
// (the groups of other partitions are served meanwhile), and installs it
// if it is still wanted. It returns the first read error; that partition
// stays loading (Kafka would serve what it read; Vltava serves nothing
// partial) until a retry succeeds or leadership changes.
func (h *groupHost) loadPending() error {
	h.mu.Lock()
	var todo []*group.Load
	for _, l := range h.loads {
		todo = append(todo, l)
	}
	h.mu.Unlock()
	var first error
	for _, l := range todo {
		err := h.loadOne(l)
		if errors.Is(err, errLoadAbandoned) {
			continue
		}
		if err != nil {
			first = cmpOr(first, err)
			continue
		}
		h.mu.Lock()
		installed := h.loads[l.Partition()] == l && h.c.FinishLoad(time.Now(), l)
		if installed {
			delete(h.loads, l.Partition())
		}
		h.mu.Unlock()
		if installed {
			h.b.logger.Info("broker: group coordinator loaded a partition", "partition", fmt.Sprintf("%s-%d", offsetsTopic, l.Partition()),
				"leader_epoch", l.Epoch(), "records", l.Records())
			select { // the loaded groups have session deadlines
			case h.wakeCh <- struct{}{}:
			default:
			}
		}
	}
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// loadOne replays one partition into l, from the log start to the log
// end, re-reading the end at each chunk, and returns once the high
// watermark has reached that end: the loaded state is then all committed
// (Kafka's coordinator runtime likewise reads to the log end but serves
// reads only at the high watermark). It gives up with errLoadAbandoned
// once this broker no longer leads the partition at the load's epoch, or
// the broker stops. A record that does not decode is logged and skipped.
func (h *groupHost) loadOne(l *group.Load) error {
	if hook := groupLoadHook.Load(); hook != nil {
		(*hook)(l.Partition())
	}
	t := h.b.topic(offsetsTopic)
	if t == nil || t.partition(l.Partition()) == nil {
		return errLoadAbandoned
	}
	p := t.partition(l.Partition())
	still := func() bool {
		select {
		case <-h.b.stopCh:
			return false
		default:
		}
		e, ok := leadsAt(p)
		return ok && e == l.Epoch()
	}
	off := p.log.StartOffset()
	for {
		if !still() {
			return errLoadAbandoned
		}
		end := p.log.EndOffset()
		if off >= end {
			if loadedHW(p) >= end {
				return nil
			}
			// Read to the end; serve once all of it is committed.
			select {
			case <-hwChangedOf(p):
			case <-h.b.stopCh:
			case <-time.After(50 * time.Millisecond): // leadership may move
			}
			continue
		}
		next, err := replayChunkTxn(p, off, end, func(hd record.Header, key, value []byte) {
			var err error
			switch {
			case hd.Control(): // transactional offsets (txn_offsets.go)
				if typ, ok := markerType(key); ok {
					l.ReplayMarker(time.Now(), hd.ProducerID, typ == record.ControlCommit)
				}
			case hd.Transactional():
				err = l.ReplayTxn(hd.ProducerID, key, value)
			default:
				err = l.Replay(time.Now(), key, value)
			}
			if err != nil {
				h.b.logger.Warn("broker: skipping a __consumer_offsets record", "partition", p.String(), "err", err)
			}
		})
		if err != nil {
			return fmt.Errorf("broker: load %s: %w", p, err)
		}
		if next <= off { // nothing readable below end: a gap (compaction)
			next = end
		}
		off = next
	}
}

// replayChunk calls fn for each record of up to 1 MiB of p's log from
// off (below end), skipping control batches, and returns the offset
// after the last batch read.
func replayChunk(p *partition, off, end int64, fn func(key, value []byte)) (int64, error) {
	return replayChunkTxn(p, off, end, func(h record.Header, key, value []byte) {
		if !h.Control() {
			fn(key, value)
		}
	})
}

// replayChunkTxn is replayChunk with each record's batch header, control
// batches included (issue 11).
func replayChunkTxn(p *partition, off, end int64, fn func(h record.Header, key, value []byte)) (int64, error) {
	s, err := p.log.Read(off, 1<<20, end)
	if err != nil {
		return off, err
	}
	buf, err := s.Bytes(nil)
	s.Close()
	if err != nil {
		return off, err
	}
	for len(buf) > 0 {
		h, batch, rest, err := record.Next(buf)
		if err != nil {
			return off, err
		}
		buf = rest
		if h.LastOffset() < off {
			continue
		}
		off = h.LastOffset() + 1
		if err := record.Records(batch, 0, func(r record.Record) error {
			fn(h, r.Key, r.Value)
			return nil
		}); err != nil {
			return off, err
		}
	}
	return off, nil
}
