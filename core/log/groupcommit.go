package log

import (
	"errors"
	"fmt"
)

// Group commit (flush.messages=1, "fsync before acknowledging").
//
// An append writes its batches at the end of the active segment under
// appendMu, records them as written (l.written), releases appendMu and
// then waits in awaitDurable. The first waiter to take flushMu reads the
// written end, fsyncs once, and publishes everything written up to that
// point: the log end offset moves over all of it at once and every waiter
// it covered returns without an fsync of its own. Appends keep writing
// while an fsync runs, and the next fsync covers them all, so one fsync
// serves as many producers as arrive during the previous one.
//
// INVARIANT: end <= written. Bytes between them are in the file but
// invisible: no read, fetch or high watermark reaches them until an fsync
// covered them. If that fsync fails the log goes offline (ErrStorage) and
// the unpublished bytes are cut from the file, so neither a reader nor a
// restart ever sees a record whose append failed.
//
// With flush.messages other than 1 appends publish at once, as before,
// and l.written always equals l.end.

// errAppendLost: the log was truncated (a leadership change made this
// replica follow) while the append waited for its fsync.
var errAppendLost = errors.New("log: append truncated away before it was made durable")

// noteWrittenLocked records an append's batches as written but not yet
// durable. REQUIRES: l.appendMu.
func (l *Log) noteWrittenLocked(next, records int64, pos writtenAt) {
	l.mu.Lock()
	l.written = next
	l.writtenAppended += records
	l.writtenPos = pos
	l.mu.Unlock()
}

// AwaitDurable waits until the append that ended before next (an
// AppendResult.DurableAt) is fsynced and published. An append made with
// AppendOptions.DeferDurable must not be acknowledged before this returns
// nil. Errors: the log's storage error, ErrClosed, or the append was
// truncated away (a leadership change) before it was made durable.
func (l *Log) AwaitDurable(next int64) error { return l.awaitDurable(next) }

// awaitDurable waits until every batch below next is fsynced and
// published: by the log's Syncer, or by fsyncing itself when no other
// waiter already covered it.
func (l *Log) awaitDurable(next int64) error {
	if s := l.config().Syncer; s != nil {
		return l.awaitSyncer(next, s)
	}
	return l.syncAndCheck(next)
}

// syncAndCheck fsyncs what is written unless another waiter's fsync
// already covered next, and reports whether next is durable.
func (l *Log) syncAndCheck(next int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.syncWrittenLocked(); err != nil {
		return err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if done, err := l.durableLocked(next); done {
		return err
	}
	return fmt.Errorf("log: append to %d not durable after an fsync to %d", next, l.syncedOffset)
}

// awaitSyncer waits for s to make the appends below next durable. Every
// pass of s over the log ends with a broadcast. Before each wait the log
// is queued on s, a no-op while it is queued: a pass taken from the queue
// after the append was written covers it. Once s is closed the waiter
// fsyncs itself.
func (l *Log) awaitSyncer(next int64, s *Syncer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if done, err := l.durableLocked(next); done {
			return err
		}
		l.mu.Unlock()
		queued := s.enqueue(l)
		l.mu.Lock()
		if !queued {
			l.mu.Unlock()
			err := l.syncAndCheck(next)
			l.mu.Lock()
			return err
		}
		// Checked again under mu: a pass that ended between the check
		// above and here broadcast before this waiter waited.
		if done, err := l.durableLocked(next); done {
			return err
		}
		l.durable.Wait()
	}
}

// durableLocked reports whether a wait for next is over, and its result:
// nil once durable, else why it never will be. REQUIRES: l.mu.
func (l *Log) durableLocked(next int64) (bool, error) {
	switch {
	case l.syncedOffset >= next && l.end >= next:
		return true, nil
	case l.failed != nil:
		return true, l.failed
	case l.closed:
		return true, ErrClosed
	case l.written < next:
		return true, errAppendLost
	}
	return false, nil
}

// syncForWaiters is one Syncer pass over the log: fsync what is written
// and publish it (a failure takes the log offline, which the waiters
// see), then wake every waiter.
func (l *Log) syncForWaiters() {
	l.flushMu.Lock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if !closed { // Close flushed everything written before it closed
		_ = l.syncWrittenLocked()
	}
	l.flushMu.Unlock()
	l.mu.Lock()
	l.durable.Broadcast()
	l.mu.Unlock()
}

// syncWrittenLocked fsyncs what is written and not yet durable, and
// publishes it. REQUIRES: l.flushMu.
func (l *Log) syncWrittenLocked() error {
	l.mu.RLock()
	target, appended, pos := l.written, l.writtenAppended, l.writtenPos
	synced, end, failed := l.syncedOffset, l.end, l.failed
	l.mu.RUnlock()
	if failed != nil {
		return failed
	}
	if synced >= target && end >= target {
		return nil
	}
	if err := l.syncDataLocked(); err != nil {
		l.cutUnpublished()
		return err
	}
	l.publishSyncedLocked(target, appended, pos)
	return nil
}

// publishSyncedLocked makes everything below target visible once it is
// durable. REQUIRES: l.flushMu.
func (l *Log) publishSyncedLocked(target, appended int64, pos writtenAt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if target > l.end {
		l.end = target
		l.appended = appended
		l.publishedPos = pos
		l.signalChangedLocked()
	}
	l.markSyncedLocked(target, appended)
	l.checkOffsetsLocked()
}

// cutUnpublished removes from the file the bytes written after the last
// published batch, once an fsync failed and took the log offline, so a
// restart does not bring back records whose append failed. Best effort:
// the disk may refuse this too.
func (l *Log) cutUnpublished() {
	l.mu.RLock()
	pub := l.publishedPos
	l.mu.RUnlock()
	if pub.seg == nil {
		return
	}
	f, err := pub.seg.acquire()
	if err != nil {
		return
	}
	defer f.release()
	pub.seg.dropTail()
	if err := f.f.Truncate(pub.pos); err != nil {
		l.config().Logger.Warn("log: could not cut unsynced appends", "dir", l.dir, "segment", pub.seg.base, "err", err)
	}
}

// settleWrittenLocked makes the written end the log end, end, after the
// log was opened or truncated: no append is pending any more.
// REQUIRES: l.mu for writing and l.appendMu (or no concurrent appender).
func (l *Log) settleWrittenLocked(end int64) {
	l.written, l.writtenAppended = end, l.appended
	if len(l.segs) > 0 {
		act := l.segs[len(l.segs)-1]
		l.publishedPos = writtenAt{seg: act, pos: act.meta.size}
		l.writtenPos = l.publishedPos
	}
}
