package log

import (
	"fmt"
	"slices"
	"time"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/record"
)

// AppendOptions says how Append stamps the batches.
type AppendOptions struct {
	LogAppendTime int64 // >0: stamp each batch as LogAppendTime with this broker time (ms)
	LeaderEpoch   int32 // written into each batch's partitionLeaderEpoch; -1 leaves it
	// CRCChecked says the caller has already verified every batch's CRC32C
	// (record.Validate does), so Append skips its own pass over the bytes.
	// Framing and headers are always checked.
	CRCChecked bool
	// Verify, if set, runs under the append lock after the producer checks
	// and just before the batches are written; its error fails the append
	// (a duplicate of a cached batch is answered before it runs). Markers
	// are appended under the same lock, so a check of transaction state
	// here can not interleave with a marker (issue 11, KIP-890 part 1).
	Verify func() error
	// DeferDurable: when the append must be fsynced before it is
	// acknowledged (flush.messages=1), Append returns once it is written
	// and sets AppendResult.DurableAt; the caller waits with AwaitDurable
	// before acknowledging. A produce request writes all its partitions
	// first, then waits for them together.
	DeferDurable bool
}

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset, LastOffset int64 // offsets assigned to the first and last record
	LogAppendTime          int64 // -1 unless stamped
	LogStartOffset         int64
	Duplicate              bool // idempotent retry: nothing appended, offsets are the original ones
	// DurableAt, with AppendOptions.DeferDurable, is the offset to pass to
	// AwaitDurable before acknowledging (0: durable or no fsync needed).
	DurableAt int64
}

// pendingBatch is one validated batch of an append.
type pendingBatch struct {
	h   record.Header
	off int // position within the appended bytes
}

// Append validates records (one or more RecordBatch v2, each header and
// CRC32C checked), assigns offsets by rewriting each batch's base offset in
// place (records is modified), checks idempotent producer sequences and
// appends the bytes to the active segment. Invalid input wraps
// record.ErrCorrupt or record.ErrShort.
func (l *Log) Append(records []byte, opts AppendOptions) (AppendResult, error) {
	l.appendMu.Lock()
	res, next, wait, err := l.appendLocked(records, opts)
	l.appendMu.Unlock()
	if err != nil || !wait {
		return res, err
	}
	// flush.messages=1: acknowledge only once durable (group commit).
	if s := l.config().Syncer; s != nil {
		s.enqueue(l) // start the fsync now; AwaitDurable queues it again if needed
	}
	if opts.DeferDurable {
		res.DurableAt = next
		return res, nil
	}
	return res, l.awaitDurable(next)
}

// appendLocked is Append under appendMu. wait says the append (or the
// original of a duplicate) must be made durable up to next before it is
// acknowledged. REQUIRES: l.appendMu.
func (l *Log) appendLocked(records []byte, opts AppendOptions) (res AppendResult, next int64, wait bool, err error) {
	l.mu.RLock()
	closed, failed, cfg, start, end := l.closed, l.failed, l.cfg, l.start, l.written
	published := l.end
	l.mu.RUnlock()
	if closed {
		return AppendResult{}, 0, false, ErrClosed
	}
	if failed != nil {
		return AppendResult{}, 0, false, failed
	}
	batches, err := l.splitBatchesLocked(records, !opts.CRCChecked)
	if err != nil {
		return AppendResult{}, 0, false, err
	}
	if start > l.prunedAt {
		l.producers.prune(start)
		l.prunedAt = start
	}
	pending, dup, err := l.checkProducers(batches, end)
	if err != nil || dup != nil {
		if dup != nil {
			res := AppendResult{BaseOffset: dup.firstOffset, LastOffset: dup.lastOffset, LogAppendTime: -1, LogStartOffset: start, Duplicate: true}
			// The original may still await its fsync.
			return res, dup.lastOffset + 1, dup.lastOffset >= published, nil
		}
		return AppendResult{}, 0, false, err
	}
	if opts.Verify != nil {
		if err := opts.Verify(); err != nil {
			return AppendResult{}, 0, false, err
		}
	}
	next, maxTs := stampBatches(records, batches, end, opts)
	if opts.LeaderEpoch >= 0 {
		// The cache entry is durable before the data: a crash never
		// leaves batches of an epoch the checkpoint lacks.
		if err := l.epochs.assign(opts.LeaderEpoch, end); err != nil {
			return AppendResult{}, 0, false, err
		}
	}
	if err := l.writeLocked(records, batches, cfg, next, maxTs); err != nil {
		l.undoEpochs(end)
		return AppendResult{}, 0, false, err
	}
	for id, p := range pending {
		l.producers[id] = p
	}
	for _, b := range batches { // transactions (txn.go)
		if b.h.Transactional() {
			ctl, ce := controlTypeOf(b.h, records[b.off:])
			l.txns.apply(b.h, ctl)
			l.producers.noteMarker(b.h, ce)
		}
		if b.h.Control() {
			delete(l.guards, b.h.ProducerID) // a check in flight is stale now
		}
	}
	if invariant.Enabled {
		l.checkTxnsLocked()
	}
	res = AppendResult{BaseOffset: end, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: start}
	if opts.LogAppendTime > 0 {
		res.LogAppendTime = opts.LogAppendTime
	}
	wait, err = l.finishWriteLocked(end, next, cfg)
	return res, next, wait, err
}

// finishWriteLocked ends an append that wrote [end, next): with
// flush.messages=1 (or while earlier appends await their fsync) it records
// it as written and the caller waits for durability; otherwise it
// publishes at once. REQUIRES: l.appendMu.
func (l *Log) finishWriteLocked(end, next int64, cfg Config) (wait bool, err error) {
	l.mu.RLock()
	pending := l.written > l.end
	l.mu.RUnlock()
	if cfg.FlushMessages == 1 || pending {
		l.noteWrittenLocked(next, next-end, l.lastWrite.after(next))
		return true, nil
	}
	return false, l.publishLocked(end, next, cfg)
}

// publishLocked makes an append that ended at next visible: the log end
// offset and the change channel. When flush.messages is reached it fsyncs
// first, so that records whose fsync failed are never visible: the log
// goes offline instead (ErrStorage) and nobody reads or acknowledges them.
// REQUIRES: l.appendMu.
func (l *Log) publishLocked(end, next int64, cfg Config) error {
	l.mu.RLock()
	appended := l.appended + next - end
	syncNow := cfg.FlushMessages > 0 && appended-l.synced >= cfg.FlushMessages
	l.mu.RUnlock()
	if syncNow {
		l.flushMu.Lock()
		err := l.syncDataLocked()
		l.flushMu.Unlock()
		if err != nil {
			l.unwriteLocked()
			return err
		}
	}
	l.mu.Lock()
	if invariant.Enabled {
		invariant.Check(next > l.end, "log %s: append ends at %d, not past the log end %d", l.dir, next, l.end)
	}
	l.end = next
	l.appended = appended
	l.written, l.writtenAppended = next, appended
	l.publishedPos = l.lastWrite.after(next)
	l.writtenPos = l.publishedPos
	if syncNow {
		l.markSyncedLocked(next, appended)
	} else if l.unflushedSince == 0 {
		l.unflushedSince = time.Now().UnixMilli()
	}
	l.checkOffsetsLocked()
	l.signalChangedLocked()
	l.mu.Unlock()
	return nil
}

// undoEpochs drops cache entries for a failed append that would have
// started at end; a failure here is repaired by the next Open.
func (l *Log) undoEpochs(end int64) {
	if err := l.epochs.truncateFromEnd(end); err != nil {
		l.config().Logger.Warn("log: leader epoch cache rollback failed", "dir", l.dir, "err", err)
	}
}

// splitBatchesLocked is splitBatches into the log's reused slice: the
// result is valid until the next append. REQUIRES: l.appendMu.
func (l *Log) splitBatchesLocked(records []byte, checkCRC bool) ([]pendingBatch, error) {
	bs, err := splitBatches(l.splitBuf[:0], records, checkCRC)
	if cap(bs) > cap(l.splitBuf) && cap(bs) <= maxSplitBuf {
		l.splitBuf = bs[:0]
	}
	return bs, err
}

// maxSplitBuf bounds the batches splitBatchesLocked keeps room for.
const maxSplitBuf = 4096

// splitBatches validates the framing, and with checkCRC the CRC, of every
// batch in records, appending them to dst.
func splitBatches(dst []pendingBatch, records []byte, checkCRC bool) ([]pendingBatch, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("log: append: %w: no record batch", record.ErrCorrupt)
	}
	bs := dst
	for rest := records; len(rest) > 0; {
		h, b, r, err := record.Next(rest)
		if err != nil {
			return nil, fmt.Errorf("log: append: %w", err)
		}
		if checkCRC {
			if err := record.CheckCRC(b); err != nil {
				return nil, fmt.Errorf("log: append: %w", err)
			}
		}
		bs = append(bs, pendingBatch{h: h, off: len(records) - len(rest)})
		rest = r
	}
	return bs, nil
}

// checkProducers validates idempotent batches against the producer state.
// It returns the updated state of each producer involved (applied only once
// the write succeeds), or the cached batch a retry duplicates.
// REQUIRES: l.appendMu.
func (l *Log) checkProducers(bs []pendingBatch, next int64) (map[int64]*producer, *seqBatch, error) {
	var pending map[int64]*producer
	for _, b := range bs {
		h := b.h
		h.BaseOffset = next
		next = h.LastOffset() + 1
		if h.ProducerID < 0 {
			continue
		}
		p, ok := pending[h.ProducerID]
		if !ok {
			if cur := l.producers[h.ProducerID]; cur != nil {
				p = cur.clone()
			}
		}
		dup, err := p.check(h)
		if err != nil || dup != nil {
			return nil, dup, err
		}
		if p == nil {
			p = &producer{epoch: h.ProducerEpoch}
		}
		p.update(h)
		if pending == nil {
			pending = map[int64]*producer{}
		}
		pending[h.ProducerID] = p
	}
	return pending, nil, nil
}

// stampBatches assigns offsets from next and applies opts to every batch,
// updating the parsed headers. It returns the next free offset and the
// largest max timestamp.
func stampBatches(records []byte, bs []pendingBatch, next int64, opts AppendOptions) (int64, int64) {
	maxTs := int64(-1)
	for i := range bs {
		b := records[bs[i].off : bs[i].off+bs[i].h.Size()]
		record.SetBaseOffset(b, next)
		if opts.LeaderEpoch >= 0 {
			record.SetPartitionLeaderEpoch(b, opts.LeaderEpoch)
		}
		if opts.LogAppendTime > 0 {
			record.SetLogAppendTime(b, opts.LogAppendTime)
		}
		h, _ := record.ParseHeader(b) // parsed before; the rewrites keep it valid
		bs[i].h = h
		next = h.LastOffset() + 1
		maxTs = max(maxTs, h.MaxTimestamp)
	}
	return next, maxTs
}

// writeLocked rolls if needed, writes records at the end of the active
// segment and publishes the new size and index entries to readers.
// REQUIRES: l.appendMu.
func (l *Log) writeLocked(records []byte, bs []pendingBatch, cfg Config, next, maxTs int64) error {
	if err := l.dropCleanMarker(); err != nil {
		return err
	}
	seg := l.active()
	if l.shouldRoll(seg.meta, cfg, int64(len(records)), next-1, maxTs) {
		if err := l.rollLocked(); err != nil {
			return l.fail("roll", err)
		}
		seg = l.active()
	}
	// INVARIANT: only the appender changes the active segment's meta, so it
	// reads it without the lock; readers see it only through seg.mu.
	m := seg.meta
	// The reference keeps the descriptor budget from closing the file
	// under the write; a file it closed while the partition was idle
	// reopens here.
	f, err := seg.acquire()
	if err != nil {
		return l.fail("append", err)
	}
	defer f.release()
	pos := m.size
	l.preallocateLocked(seg, f.f, pos, int64(len(records)))
	l.lastWrite = writtenAt{seg, pos, int64(len(records))}
	if _, err := f.f.WriteAt(records, pos); err != nil {
		f.f.Truncate(pos) // drop a partial write; readers never saw it
		return l.fail("append", err)
	}
	for _, b := range bs {
		m.add(b.h, pos+int64(b.off))
	}
	seg.mu.Lock()
	seg.meta = m
	seg.addTailLocked(records, pos, bs)
	seg.mu.Unlock()
	return nil
}

// writtenAt is where the last write of the appender started.
type writtenAt struct {
	seg *segment
	pos int64
	n   int64 // bytes written there
}

// after is the position just past the write (next unused).
func (w writtenAt) after(next int64) writtenAt {
	return writtenAt{seg: w.seg, pos: w.pos + w.n}
}

// unwriteLocked cuts the bytes of the last write, which was never
// published because its fsync failed, so that a restart (recovery keeps
// every whole batch the page cache still holds) does not bring back a
// record the producer was told had failed. Best effort: the log is
// offline and the disk may refuse this too.
// REQUIRES: l.appendMu.
func (l *Log) unwriteLocked() {
	w := l.lastWrite
	if w.seg == nil {
		return
	}
	f, err := w.seg.acquire()
	if err != nil {
		return
	}
	defer f.release()
	w.seg.dropTail()
	if err := f.f.Truncate(w.pos); err != nil {
		l.config().Logger.Warn("log: could not cut an unsynced append", "dir", l.dir, "segment", w.seg.base, "err", err)
	}
}

// shouldRoll applies Kafka's roll rules to an append of n bytes whose last
// offset is last and largest timestamp maxTs.
func (l *Log) shouldRoll(m segMeta, cfg Config, n, last, maxTs int64) bool {
	if m.size == 0 {
		return false
	}
	return m.size+n > cfg.SegmentBytes ||
		(cfg.SegmentMs > 0 && m.firstTs >= 0 && maxTs-m.firstTs > cfg.SegmentMs) ||
		!m.fits(last, m.size+n)
}

// Roll closes the active segment to appends and starts a new one at the
// log end offset. An empty active segment is kept.
func (l *Log) Roll() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkOpen(); err != nil {
		return err
	}
	return l.rollLocked()
}

// rollLocked finishes the active segment's indexes (with a final time index
// entry, so its max timestamp survives a restart), creates the next
// segment and writes a producer snapshot at the roll offset.
// REQUIRES: l.appendMu.
func (l *Log) rollLocked() error {
	if err := l.dropCleanMarker(); err != nil {
		return err
	}
	l.mu.RLock()
	end, old, interval := l.written, l.segs[len(l.segs)-1], int64(l.cfg.IndexIntervalBytes)
	l.mu.RUnlock()
	if old.meta.size == 0 {
		return nil
	}
	if invariant.Enabled {
		// INVARIANT: segments are in offset order; the new one starts
		// after every batch of the old.
		invariant.Check(old.meta.next <= end, "log %s: roll at %d before segment %d ends (%d)", l.dir, end, old.base, old.meta.next)
	}
	old.mu.Lock()
	old.meta.maybeAddTime()
	old.mu.Unlock()
	if err := old.persistIndex(false); err != nil {
		return err
	}
	seg, err := createSegment(l.dir, end, interval)
	if err != nil {
		return err
	}
	old.mu.Lock()
	old.active, old.tail = false, nil
	old.mu.Unlock()
	l.releasePreallocLocked(old)
	l.mu.Lock()
	l.segs = append(slices.Clone(l.segs), seg)
	l.dirGen++
	l.mu.Unlock()
	if err := writeSnapshot(l.dir, end, l.producers, l.txns.snapshot(l.StartOffset()), false); err != nil {
		l.config().Logger.Warn("log: producer snapshot failed", "dir", l.dir, "err", err)
	} else {
		l.snapshotAt, l.snapshotTime = end, time.Now()
	}
	return nil
}
