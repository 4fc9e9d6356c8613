package log

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/vltava/vltava/core/invariant"
)

// Flush fsyncs every appended batch and index entry, then advances the
// recovery point checkpoint to the log end offset: a crash recovery scans
// only from the segment holding it.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.RLock()
	// What is written by now, published or not, is what this flush makes
	// durable (and then publishes, groupcommit.go).
	end, appended, pos, dirGen, failed := l.written, l.writtenAppended, l.writtenPos, l.dirGen, l.failed
	i, _ := l.segmentForLocked(l.recoveryPoint)
	segs := l.segs[i:]
	l.mu.RUnlock()
	if failed != nil {
		return failed
	}
	for _, s := range segs {
		if err := s.persistIndex(true); err != nil {
			return l.fail("flush", err)
		}
		if err := syncSegment(s); err != nil {
			return l.fail("flush", err)
		}
	}
	if err := l.syncDirIfNeeded(dirGen); err != nil {
		return l.fail("flush", err)
	}
	l.publishSyncedLocked(end, appended, pos)
	if l.rpOnDisk.Load() != end {
		if err := writeFileAtomic(l.dir, recoveryPointFile, encodeOffsetCheckpoint(end), true); err != nil {
			return l.fail("flush", err)
		}
		l.rpOnDisk.Store(end)
	}
	l.mu.Lock()
	l.recoveryPoint = max(l.recoveryPoint, end)
	l.lastCheckpoint = time.Now()
	l.checkOffsetsLocked()
	l.mu.Unlock()
	return nil
}

// syncData fsyncs the log data appended since the last sync, without
// indexes or checkpoints: the flush.messages path.
func (l *Log) syncData() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.syncWrittenLocked()
}

// syncDataLocked fsyncs every segment from the one holding the synced
// offset to the last, and the directory if segments were created or
// removed. The caller marks what it covered as synced. A failure takes the
// log offline.
// REQUIRES: l.flushMu.
func (l *Log) syncDataLocked() error {
	l.mu.RLock()
	dirGen, failed := l.dirGen, l.failed
	i, _ := l.segmentForLocked(l.syncedOffset)
	segs := l.segs[i:]
	l.mu.RUnlock()
	if failed != nil {
		return failed
	}
	for _, s := range segs {
		if err := syncSegment(s); err != nil {
			return l.fail("fsync", err)
		}
	}
	if err := l.syncDirIfNeeded(dirGen); err != nil {
		return l.fail("fsync", err)
	}
	return nil
}

// REQUIRES: l.mu.
func (l *Log) markSyncedLocked(end, appended int64) {
	l.syncedOffset = max(l.syncedOffset, end)
	l.synced = max(l.synced, appended)
	if l.synced >= l.appended {
		l.unflushedSince = 0
	}
}

// REQUIRES: l.flushMu.
func (l *Log) syncDirIfNeeded(gen int64) error {
	l.mu.RLock()
	synced := l.dirSyncedGen
	l.mu.RUnlock()
	if synced >= gen {
		return nil
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("log: sync dir: %w", err)
	}
	l.mu.Lock()
	l.dirSyncedGen = max(l.dirSyncedGen, gen)
	l.mu.Unlock()
	return nil
}

// syncSegment fsyncs a segment's .log file; a deleted segment is skipped.
func syncSegment(s *segment) error {
	sf, err := s.acquire()
	if errors.Is(err, errSegmentGone) {
		return nil
	}
	if err != nil {
		return err
	}
	defer sf.release()
	if err := fsync(sf.f); err != nil {
		return fmt.Errorf("log: sync segment %d: %w", s.base, err)
	}
	return nil
}

// Maintain does the periodic work of the log; the owner calls it about
// once a second. It rolls on segment.ms, flushes on flush.ms (and after a
// roll, as Kafka does, so recovery stays bounded by the active segment),
// applies retention below hw (see ApplyRetention), and closes the files
// of inactive segments idle for a few seconds.
func (l *Log) Maintain(now time.Time, hw int64) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	cfg := l.config()
	nowMs := now.UnixMilli()
	var errs []error
	act := l.active()
	act.mu.Lock()
	size, firstTs := act.meta.size, act.meta.firstTs
	act.mu.Unlock()
	if cfg.SegmentMs > 0 && size > 0 && firstTs >= 0 && nowMs-firstTs > cfg.SegmentMs {
		errs = append(errs, l.Roll())
	}
	l.mu.RLock()
	needFlush := (cfg.FlushMs > 0 && l.unflushedSince > 0 && nowMs-l.unflushedSince >= cfg.FlushMs) ||
		l.recoveryPoint < l.segs[len(l.segs)-1].base ||
		(l.recoveryPoint < l.syncedOffset && now.Sub(l.lastCheckpoint) >= checkpointInterval)
	l.mu.RUnlock()
	if needFlush {
		errs = append(errs, l.flushWithSnapshot(now))
	}
	_, err := l.ApplyRetention(now, hw)
	errs = append(errs, err)
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	idleBefore := now.Add(-idleClose).UnixNano()
	for _, s := range segs {
		errs = append(errs, s.closeIfIdle(idleBefore))
	}
	return errors.Join(errs...)
}

// flushWithSnapshot is Maintain's Flush. At most every snapshotInterval
// it also writes a producer snapshot at the offset the flush makes
// durable, so that Open after a crash of a flushed log rebuilds producer
// state from the batch headers after that offset, not from the last roll
// (up to segment.bytes of headers): a restart after kill -9 reads a
// bounded tail however large the active segment is. The state is taken
// under appendMu at the written end, the flush covers that end, and only
// then is the file written, so a snapshot never names an offset the
// recovery point does not cover: a crash can not leave it above the log
// end, where Open would drop it. adminMu keeps Truncate (and Close) out
// meanwhile, so the offset still holds the batches the state describes.
func (l *Log) flushWithSnapshot(now time.Time) error {
	due := func() bool {
		l.mu.RLock()
		at, closed := l.written, l.closed
		l.mu.RUnlock()
		return !closed && at > l.snapshotAt && now.Sub(l.snapshotTime) >= snapshotInterval
	}
	l.appendMu.Lock()
	ok := due()
	l.appendMu.Unlock()
	if !ok {
		return l.Flush() // as before: no snapshot, no adminMu
	}
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.appendMu.Lock()
	l.mu.RLock()
	at := l.written
	l.mu.RUnlock()
	var data []byte
	if due() {
		data = encodeSnapshot(l.producers, l.txns.snapshot(l.StartOffset()))
	}
	l.appendMu.Unlock()
	if err := l.Flush(); err != nil || data == nil {
		return err
	}
	l.mu.RLock()
	covered := l.recoveryPoint >= at
	l.mu.RUnlock()
	if invariant.Enabled {
		// INVARIANT (doc.go, producer snapshot): a snapshot written
		// outside a roll or Close names a durable offset.
		invariant.Check(covered, "log %s: producer snapshot at %d above the recovery point after a flush", l.dir, at)
	}
	if !covered {
		return nil
	}
	if err := writeSnapshotData(l.dir, at, data, false); err != nil {
		l.config().Logger.Warn("log: producer snapshot failed", "dir", l.dir, "err", err)
		return nil
	}
	l.appendMu.Lock()
	if at > l.snapshotAt {
		l.snapshotAt, l.snapshotTime = at, now
	}
	l.appendMu.Unlock()
	return nil
}

// ApplyRetention deletes the oldest segments whose max timestamp is older
// than retention.ms, those beyond retention.bytes, and those wholly below
// the log start offset, but only segments wholly below hw, the partition's
// high watermark: as in Kafka, data a follower may still need to fetch is
// never deleted, whatever its timestamps, and the log start offset never
// moves past hw (pass math.MaxInt64 for a log without replicas to wait
// for). The active segment is deleted only when it and every older segment
// are past retention.ms and the whole log is below hw (it is rolled first,
// as Kafka does). The log start offset moves to the first remaining
// segment if that is later.
func (l *Log) ApplyRetention(now time.Time, hw int64) (deletedSegments int, err error) {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	l.mu.RLock()
	cfg, segs, start, end := l.cfg, l.segs, l.start, l.end
	l.mu.RUnlock()
	hw = min(hw, end)
	var total int64
	for _, s := range segs {
		sz, _, _ := s.stats()
		total += sz
	}
	diff := total - cfg.RetentionBytes
	k := 0
	for ; k < len(segs)-1; k++ {
		sz, maxTs, _ := segs[k].stats()
		if maxTs < 0 {
			maxTs = modTimeMs(segs[k].logPath())
		}
		byTime := cfg.RetentionMs >= 0 && now.UnixMilli()-maxTs > cfg.RetentionMs
		bySize := cfg.RetentionBytes >= 0 && diff-sz >= 0
		byStart := segs[k+1].base <= start
		// INVARIANT: retention deletes only segments wholly below the high
		// watermark (their successor starts at or below it), or below the
		// log start offset that DeleteRecords already moved.
		belowHW := segs[k+1].base <= hw
		if !byStart && (!belowHW || (!byTime && !bySize)) {
			break
		}
		diff -= sz
	}
	if k == len(segs)-1 && end <= hw && l.activeExpired(segs[k], cfg, now) {
		// Every segment is past retention.ms, the active one too: as Kafka
		// does, roll so that the expired active segment can go as well.
		if err := l.Roll(); err != nil {
			return 0, err
		}
		// Appends may have run since end was read: the rolled segment goes
		// only if it still ends at or below the high watermark.
		l.mu.RLock()
		cur := l.segs
		l.mu.RUnlock()
		if len(cur) == len(segs)+1 && cur[len(segs)].base <= hw {
			end = cur[len(segs)].base
			k++
		}
	}
	if invariant.Enabled && k > 0 {
		next := end // k == len(segs): the rolled active segment goes too
		if k < len(segs) {
			next = segs[k].base
		}
		invariant.Check(next <= hw || next <= start, "log %s: retention deletes below %d, above the high watermark %d", l.dir, next, hw)
	}
	return k, l.deleteFront(k)
}

// activeExpired reports whether the active segment holds data older than
// retention.ms.
func (l *Log) activeExpired(act *segment, cfg Config, now time.Time) bool {
	sz, maxTs, _ := act.stats()
	return cfg.RetentionMs >= 0 && sz > 0 && maxTs >= 0 && now.UnixMilli()-maxTs > cfg.RetentionMs
}

func modTimeMs(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixMilli()
}

// deleteFront removes the first k segments and moves the log start offset
// to the first remaining segment if that is later.
// REQUIRES: l.adminMu.
func (l *Log) deleteFront(k int) error {
	if k == 0 {
		return nil
	}
	if err := l.dropCleanMarker(); err != nil {
		return err
	}
	l.mu.Lock()
	victims := l.segs[:k]
	l.segs = slices.Clone(l.segs[k:])
	moved := l.segs[0].base > l.start
	l.start = max(l.start, l.segs[0].base)
	start := l.start
	l.dirGen++
	l.checkOffsetsLocked()
	l.mu.Unlock()
	var errs []error
	if moved {
		// Not fsynced: a lost checkpoint is re-derived from the first segment.
		errs = append(errs, writeFileAtomic(l.dir, logStartFile, encodeOffsetCheckpoint(start), false))
	}
	for _, s := range victims {
		l.config().Logger.Info("log: deleting segment", "dir", l.dir, "segment", s.base)
		errs = append(errs, s.remove())
	}
	errs = append(errs, l.epochs.truncateFromStart(start))
	return errors.Join(errs...)
}

// DeleteRecordsBefore moves the log start offset to offset (persisted
// before returning) and deletes the segments wholly below it. offset must
// not exceed the log end offset. It returns the new log start offset.
func (l *Log) DeleteRecordsBefore(offset int64) (newStart int64, err error) {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.mu.RLock()
	closed, failed, start, end, segs := l.closed, l.failed, l.start, l.end, l.segs
	l.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	if failed != nil {
		return start, failed
	}
	if offset < 0 || offset > end {
		return start, fmt.Errorf("%w: delete before %d, log end %d", ErrOffsetOutOfRange, offset, end)
	}
	if offset <= start {
		return start, nil
	}
	if err := writeFileAtomic(l.dir, logStartFile, encodeOffsetCheckpoint(offset), true); err != nil {
		return start, err
	}
	l.mu.Lock()
	l.start = max(l.start, offset)
	l.checkOffsetsLocked()
	l.mu.Unlock()
	if err := l.epochs.truncateFromStart(offset); err != nil {
		return offset, err
	}
	k := 0
	for k < len(segs)-1 && segs[k+1].base <= offset {
		k++
	}
	return offset, l.deleteFront(k)
}
