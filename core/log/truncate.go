package log

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// Truncate removes every batch containing an offset at or after offset, so
// the log end offset becomes the start of the batch holding offset (offset
// itself when it starts a batch). An offset below the log start empties the
// log and restarts it there. Slices over removed bytes may read short.
//
// Truncate excludes Flush (flushMu): a flush that read the log end before
// the cut must not checkpoint that end as the recovery point once other
// bytes, never fsynced, sit at those offsets.
func (l *Log) Truncate(offset int64) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.RLock()
	// Appends written but awaiting their fsync (groupcommit.go) were never
	// visible nor acknowledged: a truncation drops them whole, and their
	// waiters fail with errAppendLost.
	closed, failed, start, end, segs := l.closed, l.failed, l.start, l.written, l.segs
	published := l.end
	interval := int64(l.cfg.IndexIntervalBytes)
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if failed != nil {
		return failed
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= end {
		// Nothing to cut, but the epoch cache may still hold an entry
		// at the log end that no batch backs: a broker that became
		// leader (assigning the epoch's start) and lost the leadership
		// before appending. A follower keeping it would send it as its
		// last fetched epoch forever (Kafka's truncateTo drops it too).
		return l.epochs.truncateFromEnd(offset)
	}
	offset = min(offset, published)
	if err := l.dropCleanMarker(); err != nil {
		return err
	}
	var err error
	if offset < start || offset <= segs[0].base {
		err = l.truncateFully(offset, segs, interval)
	} else {
		err = l.truncateWithin(offset, segs, interval)
	}
	if err != nil {
		return err
	}
	l.mu.RLock()
	newEnd, rp := l.end, l.recoveryPoint
	l.mu.RUnlock()
	l.rpOnDisk.Store(-1)
	if err := writeFileAtomic(l.dir, recoveryPointFile, encodeOffsetCheckpoint(rp), true); err != nil {
		return err
	}
	// After the segments: a crash in between leaves entries past the
	// log end, which Open drops.
	if err := l.epochs.truncateFromEnd(newEnd); err != nil {
		return err
	}
	if err := removeSnapshotsAbove(l.dir, newEnd); err != nil {
		return err
	}
	return l.loadProducers()
}

// truncateFully deletes all segments and starts an empty log at offset.
// REQUIRES: l.adminMu, l.appendMu.
func (l *Log) truncateFully(offset int64, segs []*segment, interval int64) error {
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.remove())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	seg, err := createSegment(l.dir, offset, interval)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(l.dir, logStartFile, encodeOffsetCheckpoint(offset), true); err != nil {
		return err
	}
	l.mu.Lock()
	l.segs = []*segment{seg}
	l.start, l.end = offset, offset
	l.resetOffsetsLocked(offset)
	l.mu.Unlock()
	return nil
}

// truncateWithin cuts the segment holding offset at the batch containing
// it and deletes every later segment.
// REQUIRES: l.adminMu, l.appendMu.
func (l *Log) truncateWithin(offset int64, segs []*segment, interval int64) error {
	l.mu.RLock()
	i, seg := l.segmentForLocked(offset)
	l.mu.RUnlock()
	for _, s := range segs[i+1:] {
		if err := s.remove(); err != nil {
			return err
		}
	}
	sf, pos, size, err := seg.view(uint32(offset-seg.base), interval)
	if err != nil {
		return err
	}
	cut := size
	sc := newHeaderScanner(sf.f, pos, size)
	for {
		h, p, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			sf.release()
			return fmt.Errorf("log: segment %d: %w", seg.base, err)
		}
		if h.LastOffset() >= offset {
			cut = p
			break
		}
	}
	sf.release()
	m, err := l.cutSegment(seg, cut, interval)
	if err != nil {
		return err
	}
	if err := seg.resetIndexFiles(); err != nil {
		return err
	}
	l.mu.Lock()
	l.segs = slices.Clone(segs[:i+1])
	l.end = m.next
	l.resetOffsetsLocked(m.next)
	l.checkOffsetsLocked()
	l.mu.Unlock()
	return nil
}

// cutSegment truncates seg's file to size, makes it the active segment and
// rebuilds its metadata from the remaining headers (fresh slices, so no
// concurrent index writer sees entries change).
func (l *Log) cutSegment(seg *segment, size, interval int64) (segMeta, error) {
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if seg.file != nil && !seg.active {
		seg.dropFileLocked() // reopen read-write below; Slices keep the old descriptor
	}
	seg.active, seg.tail = true, nil
	if err := seg.openLocked(); err != nil {
		return segMeta{}, err
	}
	if err := seg.file.f.Truncate(size); err != nil {
		return segMeta{}, fmt.Errorf("log: truncate segment %d: %w", seg.base, err)
	}
	m, err := scanHeaders(seg.file.f, size, seg.base, interval)
	if err != nil {
		return segMeta{}, fmt.Errorf("log: segment %d: %w", seg.base, err)
	}
	seg.meta, seg.loaded = m, true
	return m, nil
}

// resetOffsetsLocked lowers the durability marks after a truncation to end.
// REQUIRES: l.mu.
func (l *Log) resetOffsetsLocked(end int64) {
	l.settleWrittenLocked(end)
	l.recoveryPoint = min(l.recoveryPoint, end)
	l.syncedOffset = min(l.syncedOffset, end)
	l.cleaned = min(l.cleaned, end)
	l.dirGen++
}
