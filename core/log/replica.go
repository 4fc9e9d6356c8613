package log

import (
	"errors"
	"fmt"
	"os"

	"github.com/vltava/vltava/core/record"
)

// ErrUnexpectedOffset is returned by AppendReplica for batches that do not
// continue the log: a base offset below the log end offset or not above
// the previous batch's last offset.
var ErrUnexpectedOffset = errors.New("log: unexpected append offset")

// AppendReplica appends batches fetched from the leader as they are: base
// offsets, partition leader epochs, timestamps and CRCs are kept, not
// rewritten. Every batch's framing and CRC32C is checked. The first batch
// must start at or above EndOffset and each following batch above the
// previous one's last offset (a gap is a range the leader compacted away);
// anything else fails with ErrUnexpectedOffset and appends nothing.
//
// Producer state is updated from the batch headers without sequence
// validation, so idempotent deduplication survives a leader change; the
// leader-epoch cache gains an entry for every batch whose epoch differs
// from the latest. It returns the last offset appended.
func (l *Log) AppendReplica(records []byte) (lastOffset int64, err error) {
	l.appendMu.Lock()
	next, wait, err := l.appendReplicaLocked(records)
	l.appendMu.Unlock()
	if err != nil {
		return 0, err
	}
	if wait {
		err = l.awaitDurable(next)
	}
	return next - 1, err
}

// appendReplicaLocked is AppendReplica under appendMu; wait as in
// appendLocked. REQUIRES: l.appendMu.
func (l *Log) appendReplicaLocked(records []byte) (next int64, wait bool, err error) {
	l.mu.RLock()
	closed, failed, cfg, start, end := l.closed, l.failed, l.cfg, l.start, l.written
	l.mu.RUnlock()
	if closed {
		return 0, false, ErrClosed
	}
	if failed != nil {
		return 0, false, failed
	}
	batches, err := l.splitBatchesLocked(records, true)
	if err != nil {
		return 0, false, err
	}
	next, maxTs := end, int64(-1)
	hs := make([]record.Header, len(batches))
	for i, b := range batches {
		if b.h.BaseOffset < next {
			return 0, false, fmt.Errorf("%w: batch at %d, expected at least %d", ErrUnexpectedOffset, b.h.BaseOffset, next)
		}
		next = b.h.LastOffset() + 1
		maxTs = max(maxTs, b.h.MaxTimestamp)
		hs[i] = b.h
	}
	if start > l.prunedAt {
		l.producers.prune(start)
		l.prunedAt = start
	}
	if err := l.epochs.assignHeaders(hs); err != nil {
		return 0, false, err
	}
	if err := l.writeLocked(records, batches, cfg, next, maxTs); err != nil {
		l.undoEpochs(end)
		return 0, false, err
	}
	for i, h := range hs {
		l.producers.apply(h)
		if h.Transactional() {
			ctl, ce := controlTypeOf(h, records[batches[i].off:])
			l.txns.apply(h, ctl)
			l.producers.noteMarker(h, ce)
		}
	}
	wait, err = l.finishWriteLocked(end, next, cfg)
	return next, wait, err
}

// TruncateFullyAndStartAt deletes every segment, the producer state and
// the leader-epoch cache and restarts the log empty at offset, which may
// lie above the log end offset. A follower does this when the leader's
// log start offset is beyond its log end.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.flushMu.Lock() // as in Truncate: no flush checkpoints the old end
	defer l.flushMu.Unlock()
	l.mu.RLock()
	closed, failed, segs := l.closed, l.failed, l.segs
	interval := int64(l.cfg.IndexIntervalBytes)
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if failed != nil {
		return failed
	}
	if err := l.dropCleanMarker(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.truncateFully(offset, segs, interval); err != nil {
		return err
	}
	l.mu.Lock()
	l.recoveryPoint, l.syncedOffset = offset, offset
	l.mu.Unlock()
	l.rpOnDisk.Store(-1)
	if err := writeFileAtomic(l.dir, recoveryPointFile, encodeOffsetCheckpoint(offset), true); err != nil {
		return err
	}
	if err := l.epochs.clear(); err != nil {
		return err
	}
	if err := removeSnapshotsAbove(l.dir, -1); err != nil {
		return err
	}
	l.producers, l.prunedAt = producerState{}, offset
	l.snapshotAt = -1
	l.txns.reset(l.producers, nil)
	return nil
}

// LatestEpoch returns the newest leader epoch in the leader-epoch cache;
// ok is false when the cache is empty.
func (l *Log) LatestEpoch() (epoch int32, ok bool) {
	e, ok := l.epochs.latest()
	if !ok {
		return -1, false
	}
	return e.epoch, true
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101): for the
// requested epoch it returns the largest known epoch <= requested and that
// epoch's end offset, which is the start offset of the next known epoch,
// or the log end offset when it is the latest. A requested epoch below
// every known one returns (requested, start of the first known epoch).
// An unknown epoch (negative, above the latest, or an empty cache)
// returns (-1, -1). The end offset never exceeds the log end offset.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	leo := l.EndOffset()
	e, off := endOffsetFor(l.epochs.snapshot(), epoch, leo)
	if off > leo {
		off = leo // a concurrent Truncate cut the log before the cache
	}
	return e, off
}

// AssignEpochStart records that epoch starts at startOffset, as a new
// leader does with its log end offset before accepting writes. Entries at
// or above the epoch or the offset are replaced (Kafka's assign rule).
func (l *Log) AssignEpochStart(epoch int32, startOffset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkOpen(); err != nil {
		return err
	}
	end := l.EndOffset()
	if epoch < 0 || startOffset < 0 || startOffset > end {
		return fmt.Errorf("%w: epoch %d at %d, log end %d", ErrOffsetOutOfRange, epoch, startOffset, end)
	}
	if startOffset == end {
		return l.epochs.assignAtEnd(epoch, end)
	}
	return l.epochs.assign(epoch, startOffset)
}

// loadEpochs restores the leader-epoch cache at Open: the checkpoint file
// with entries past the log end dropped and the first moved up to the log
// start. A missing or damaged file is rebuilt from every batch header.
// REQUIRES: called from Open only.
func (l *Log) loadEpochs() error {
	es, err := readLeaderEpochs(l.dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			l.cfg.Logger.Warn("log: rebuilding leader epoch cache", "dir", l.dir, "err", err)
		}
		es = nil
		err = l.forEachHeader(l.start, func(h record.Header) {
			es, _ = assignEntries(es, h.PartitionLeaderEpoch, h.BaseOffset)
		})
		if err != nil {
			return err
		}
		l.epochs.entries = es
		// A new, empty log has no epochs to write down yet.
		return l.epochs.update(func(es []epochEntry) ([]epochEntry, bool) { return es, len(es) > 0 })
	}
	l.epochs.entries = es
	if err := l.epochs.truncateFromEnd(l.end); err != nil {
		return err
	}
	return l.epochs.truncateFromStart(l.start)
}
