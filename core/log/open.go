package log

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/record"
)

// Open opens the partition log in dir, creating the directory if missing.
// After a clean Close it trusts the files; otherwise it validates every
// batch from the segment holding the recovery point on, truncates at the
// first torn or corrupt batch and rebuilds the indexes it scanned.
func Open(dir string, cfg Config) (*Log, error) {
	cfg = cfg.normalized()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	l := &Log{dir: dir, cfg: cfg, changed: make(chan struct{}), producers: producerState{}}
	l.durable.L = &l.mu
	l.rpOnDisk.Store(-1)
	l.epochs.dir = dir
	recovered, err := l.load()
	if err != nil {
		for _, s := range l.segs {
			s.closeFile()
		}
		return nil, err
	}
	if err := l.loadProducers(); err != nil {
		l.closeAll()
		return nil, err
	}
	if err := l.loadEpochs(); err != nil {
		l.closeAll()
		return nil, err
	}
	if recovered {
		// Make what the scan accepted durable, and record the files as a
		// clean Close would: a crash before the next change then scans
		// nothing again (the marker goes before that change, as after any
		// clean Open).
		if err := l.Flush(); err != nil {
			l.closeAll()
			return nil, err
		}
		if err := l.writeCleanState(l.end); err != nil {
			l.closeAll()
			return nil, fmt.Errorf("log: %w", err)
		}
		l.marker.pending.Store(true)
		l.marker.current = true
	}
	l.cleaned = min(l.cleaned, l.end)
	l.lastCheckpoint = time.Now()
	l.mu.Lock()
	l.checkOffsetsLocked()
	l.mu.Unlock()
	if invariant.Enabled {
		// INVARIANT (doc.go, leader-epoch checkpoint): after Open no entry
		// starts at or beyond the log end.
		// The first starts at or after the log start.
		if e, ok := l.epochs.latest(); ok {
			invariant.Check(e.start < l.end, "log %s: leader epoch %d starts at %d, at or past the log end %d", dir, e.epoch, e.start, l.end)
		}
		if es := l.epochs.snapshot(); len(es) > 0 {
			invariant.Check(es[0].start >= l.start, "log %s: leader epoch %d starts at %d, below the log start %d", dir, es[0].epoch, es[0].start, l.start)
		}
	}
	return l, nil
}

func (l *Log) closeAll() {
	for _, s := range l.segs {
		s.closeFile()
	}
}

// load reads the directory and sets segments, offsets and the recovery
// point. It reports whether batches were scanned for crash recovery.
func (l *Log) load() (recovered bool, err error) {
	// One listing of the directory serves the whole Open (a broker
	// opens thousands of logs at start-up): swaps, segments, snapshots.
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return false, fmt.Errorf("log: %w", err)
	}
	if changed, err := l.finishSwaps(ents); err != nil {
		return false, err
	} else if changed {
		if ents, err = os.ReadDir(l.dir); err != nil {
			return false, fmt.Errorf("log: %w", err)
		}
	}
	listed := func(name string) bool {
		return slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == name })
	}
	// Only compacted logs have a cleaner checkpoint, few a log start
	// checkpoint: no failed open for them per log.
	if listed(cleanerCheckpointFile) {
		if c, err := readOffsetCheckpoint(l.dir, cleanerCheckpointFile); err == nil {
			l.cleaned = c
		}
	}
	bases := l.segmentsIn(ents)
	l.openSnapshots = snapshotsIn(ents)
	lg := l.cfg.Logger
	startCk, err := int64(0), error(os.ErrNotExist)
	if listed(logStartFile) {
		startCk, err = readOffsetCheckpoint(l.dir, logStartFile)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			lg.Warn("log: ignoring log start checkpoint", "dir", l.dir, "err", err)
		}
		startCk = 0
	}
	// The recovery point matters only to a load that is not clean.
	rp := int64(-1)
	recoveryPoint := func() int64 {
		if rp < 0 {
			var err error
			if rp, err = readOffsetCheckpoint(l.dir, recoveryPointFile); err != nil {
				rp = 0
			}
		}
		return rp
	}
	// The marker describes the files as Close left them; it stays until
	// the first change (dropCleanMarker), and is deleted before recovery
	// changes anything.
	_, table, cerr := readCleanMarker(l.dir)
	clean := cerr == nil
	if !errors.Is(cerr, os.ErrNotExist) {
		l.marker.pending.Store(true)
	}
	if len(bases) == 0 {
		if !listed(recoveryPointFile) {
			l.rpOnDisk.Store(0) // none: the same as offset 0
		}
		if err := l.dropCleanMarker(); err != nil {
			return false, err
		}
		return false, l.startEmpty(startCk)
	}
	for _, b := range bases {
		l.segs = append(l.segs, newSegment(l.dir, b))
	}
	if table != nil && !sameBases(table, bases) {
		table = nil // the files changed since Close: read them
	}
	scanFrom := len(l.segs) - 1
	if !clean {
		scanFrom, _ = l.segmentForLocked(recoveryPoint())
	}
	for i := range scanFrom {
		if e, ok := table[l.segs[i].base]; ok {
			s := l.segs[i]
			s.meta = newSegMeta(s.base, int64(l.cfg.IndexIntervalBytes))
			s.meta.size, s.meta.maxTs, s.meta.maxTsOff = e.size, e.maxTs, e.maxTsOff
			continue
		}
		if err := l.loadTrusted(l.segs[i]); err != nil {
			return false, err
		}
	}
	if clean {
		act := l.segs[scanFrom]
		e, ok := table[act.base]
		// A segment no larger than the index interval has no offset
		// index entry (the first batch never needs one), so its headers
		// are read from the start without opening the index files.
		err = l.loadActiveTail(act, ok && e.size <= int64(l.cfg.IndexIntervalBytes))
		if ok && err == nil && act.meta.size != e.size {
			err = fmt.Errorf("%w: active segment is %d bytes, the clean-shutdown marker says %d", record.ErrCorrupt, act.meta.size, e.size)
		}
		if errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrShort) {
			lg.Warn("log: clean shutdown marker but damaged tail, recovering", "dir", l.dir, "err", err)
			clean, err = false, nil
		}
		if err != nil {
			return false, err
		}
	}
	if !clean {
		if err := l.dropCleanMarker(); err != nil {
			return false, err
		}
		if err := l.recoverFrom(scanFrom, recoveryPoint()); err != nil {
			return false, err
		}
	}
	l.marker.current = clean && table != nil
	if clean {
		return false, l.finishLoad(startCk, 0, true)
	}
	return true, l.finishLoad(startCk, recoveryPoint(), false)
}

// sameBases reports whether the marker's table lists exactly bases.
func sameBases(table map[int64]cleanSeg, bases []int64) bool {
	if len(table) != len(bases) {
		return false
	}
	for _, b := range bases {
		if _, ok := table[b]; !ok {
			return false
		}
	}
	return true
}

// listSegments returns the base offsets of the .log files in the directory
// and removes leftovers: temporary files and index files without a log.
func (l *Log) listSegments() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return l.segmentsIn(ents), nil
}

// segmentsIn is listSegments over a listing of the directory.
func (l *Log) segmentsIn(ents []os.DirEntry) []int64 {
	var bases []int64
	logs := map[int64]bool{}
	for _, e := range ents {
		if b, ok := parseSegName(e.Name(), logSuffix); ok {
			bases = append(bases, b)
			logs[b] = true
		}
	}
	for _, e := range ents {
		name := e.Name()
		b1, ok1 := parseSegName(name, indexSuffix)
		b2, ok2 := parseSegName(name, timeSuffix)
		if strings.HasSuffix(name, tmpSuffix) || (ok1 && !logs[b1]) || (ok2 && !logs[b2]) {
			os.Remove(filepath.Join(l.dir, name))
		}
	}
	slices.Sort(bases)
	return bases
}

// startEmpty creates the first segment of a log with no segment files.
func (l *Log) startEmpty(start int64) error {
	s, err := createSegment(l.dir, start, int64(l.cfg.IndexIntervalBytes))
	if err != nil {
		return err
	}
	l.segs = []*segment{s}
	l.start, l.end, l.recoveryPoint, l.syncedOffset = start, start, start, start
	l.settleWrittenLocked(start)
	l.dirGen++
	return nil
}

// loadTrusted prepares an inactive segment below the recovery point: its
// size from the file system and its max timestamp from the last time index
// entry. Indexes load lazily on first read.
func (l *Log) loadTrusted(s *segment) error {
	fi, err := os.Stat(s.logPath())
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	s.meta = newSegMeta(s.base, int64(l.cfg.IndexIntervalBytes))
	s.meta.size = fi.Size()
	if e, ok := lastTimeEntry(s.timePath()); ok || s.meta.size == 0 {
		if ok {
			s.meta.maxTs, s.meta.maxTsOff = e.ts, s.base+int64(e.rel)
		}
		return nil
	}
	// No usable time index: rebuild both indexes from the headers.
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return err
	}
	defer s.dropFileLocked()
	m, err := scanHeaders(s.file.f, s.meta.size, s.base, s.meta.interval)
	if err != nil {
		return fmt.Errorf("log: segment %d below recovery point: %w", s.base, err)
	}
	m.maybeAddTime()
	s.meta = m
	s.meta.index, s.meta.tindex = nil, nil
	return writeIndexFiles(s, m)
}

// lastTimeEntry reads the final entry of a .timeindex file.
func lastTimeEntry(path string) (timeEntry, bool) {
	f, err := os.Open(path)
	if err != nil {
		return timeEntry{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 || fi.Size()%timeEntrySize != 0 {
		return timeEntry{}, false
	}
	var b [timeEntrySize]byte
	if _, err := f.ReadAt(b[:], fi.Size()-timeEntrySize); err != nil {
		return timeEntry{}, false
	}
	es, err := decodeTimeIndex(b[:])
	if err != nil {
		return timeEntry{}, false
	}
	return es[0], true
}

// loadActiveTail loads the last segment after a clean shutdown: indexes
// from their files, then batch headers from the last indexed position to
// the end of the file to restore the running state. A damaged header is
// returned as corruption so the caller falls back to a full scan.
// small says the segment is at most one index interval long: its index
// files are not read.
func (l *Log) loadActiveTail(s *segment, small bool) error {
	s.active = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return err
	}
	fi, err := s.file.f.Stat()
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	interval := int64(l.cfg.IndexIntervalBytes)
	var ib, tb []byte
	if !small {
		ib, _ = os.ReadFile(s.indexPath())
		tb, _ = os.ReadFile(s.timePath())
	}
	idx, err1 := decodeOffsetIndex(ib, fi.Size())
	tidx, err2 := decodeTimeIndex(tb)
	m := newSegMeta(s.base, interval)
	pos := int64(0)
	if err1 == nil && err2 == nil && len(idx) > 0 {
		last := idx[len(idx)-1]
		m.index = slices.Clone(idx[:len(idx)-1])
		for _, e := range tidx {
			if e.rel <= last.rel {
				m.tindex = append(m.tindex, e)
				m.maxTs, m.maxTsOff = e.ts, s.base+int64(e.rel)
			}
		}
		first, err := headerAt(s.file.f, 0)
		if err != nil {
			return fmt.Errorf("log: segment %d: %w", s.base, err)
		}
		pos, m.size, m.since, m.firstTs = int64(last.pos), int64(last.pos), interval+1, first.MaxTimestamp
	}
	sc := newHeaderScanner(s.file.f, pos, fi.Size())
	for {
		h, p, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("log: segment %d: %w", s.base, err)
		}
		m.add(h, p)
	}
	s.meta, s.loaded = m, true
	s.idxOnDisk, s.tOnDisk = 0, 0 // rewritten on the next flush
	return nil
}

// recoverFrom validates segments from index i on. At the first bad batch
// it truncates that segment and deletes every later one. In the segment
// holding the recovery point rp, the batches below rp (fsynced, with
// their index entries) are taken from the segment's index files, and
// validation starts at the last indexed batch below rp: recovery reads
// the unflushed bytes, not the whole segment.
func (l *Log) recoverFrom(i int, rp int64) error {
	lg := l.cfg.Logger
	interval := int64(l.cfg.IndexIntervalBytes)
	minBase := int64(0)
	if i > 0 {
		minBase = l.segs[i].base
	}
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		limit := int64(math.MaxInt64)
		if i+1 < len(l.segs) {
			limit = l.segs[i+1].base
		}
		last := i == len(l.segs)-1
		lim := scanLimits{minBase: minBase, limit: limit}
		var (
			m        segMeta
			from     int64 // where validation started
			bad, err error
		)
		if s.base < rp && rp < limit {
			m, from, bad, err = l.validateFromRecoveryPoint(s, interval, lim, rp)
		} else {
			m, bad, err = l.validateFile(s, interval, lim)
		}
		if err != nil {
			return err
		}
		lg.Info("log: recovered segment", "dir", l.dir, "segment", s.base, "bytes", m.size, "validated_from", from, "validated_bytes", m.size-from, "next", m.next)
		if bad != nil {
			lg.Warn("log: truncating at bad batch", "dir", l.dir, "segment", s.base, "position", m.size, "err", bad)
			if err := os.Truncate(s.logPath(), m.size); err != nil {
				return fmt.Errorf("log: truncate segment %d: %w", s.base, err)
			}
			for _, later := range l.segs[i+1:] {
				lg.Warn("log: deleting segment after bad batch", "dir", l.dir, "segment", later.base)
				if err := later.remove(); err != nil {
					return fmt.Errorf("log: %w", err)
				}
			}
			l.segs = l.segs[:i+1]
			l.dirGen++
			last = true
		}
		if !last {
			m.maybeAddTime()
		}
		s.meta, s.loaded, s.active = m, true, last
		if err := writeIndexFiles(s, m); err != nil {
			return err
		}
		s.idxOnDisk, s.tOnDisk, s.idxDirty = len(m.index), len(m.tindex), true
		minBase = m.next
		if last {
			break
		}
		// Scanned inactive segments keep their fresh indexes in memory
		// but not their descriptors.
		s.closeFile()
	}
	return nil
}

// validateFromRecoveryPoint validates s from its last indexed batch below
// rp on (see recoverFrom). Without a usable index entry below rp, or if
// the batch that entry names does not validate (the index can not be
// trusted then), it validates the whole file.
func (l *Log) validateFromRecoveryPoint(s *segment, interval int64, lim scanLimits, rp int64) (segMeta, int64, error, error) {
	f, err := os.Open(s.logPath())
	if err != nil {
		return segMeta{}, 0, nil, fmt.Errorf("log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segMeta{}, 0, nil, fmt.Errorf("log: %w", err)
	}
	size := fi.Size()
	ib, _ := os.ReadFile(s.indexPath())
	tb, _ := os.ReadFile(s.timePath())
	idx, err1 := decodeOffsetIndex(ib, size)
	tidx, err2 := decodeTimeIndex(tb)
	k := -1 // the last entry whose batch starts below rp
	for j, e := range idx {
		if s.base+int64(e.rel) < rp {
			k = j
		}
	}
	whole := func() (segMeta, int64, error, error) {
		m, bad, err := validateSegment(f, size, s.base, interval, lim)
		return m, 0, bad, err
	}
	if err1 != nil || err2 != nil || k < 0 {
		return whole()
	}
	at := idx[k]
	m := newSegMeta(s.base, interval)
	m.index = slices.Clone(idx[:k])
	for _, e := range tidx {
		if e.rel <= at.rel {
			m.tindex = append(m.tindex, e)
			m.maxTs, m.maxTsOff = e.ts, s.base+int64(e.rel)
		}
	}
	first, err := headerAt(f, 0)
	if err != nil {
		return whole()
	}
	start := int64(at.pos)
	if h, err := headerAt(f, start); err != nil || h.BaseOffset != s.base+int64(at.rel) {
		return whole() // the entry does not name the batch there
	}
	m.size, m.since, m.firstTs, m.next = start, interval+1, first.MaxTimestamp, s.base+int64(at.rel)
	from := lim
	from.minBase = max(lim.minBase, s.base+int64(at.rel))
	vm, bad, err := validateFrom(f, size, start, m, from)
	if err == nil && bad != nil && vm.size == start {
		// The indexed batch itself is bad: it is below the recovery
		// point, so the index, not the data, is wrong.
		return whole()
	}
	return vm, start, bad, err
}

// validateFile runs validateSegment over s's file.
func (l *Log) validateFile(s *segment, interval int64, lim scanLimits) (segMeta, error, error) {
	f, err := os.Open(s.logPath())
	if err != nil {
		return segMeta{}, nil, fmt.Errorf("log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segMeta{}, nil, fmt.Errorf("log: %w", err)
	}
	return validateSegment(f, fi.Size(), s.base, interval, lim)
}

// finishLoad settles offsets once the segments are known.
func (l *Log) finishLoad(startCk, rp int64, clean bool) error {
	act := l.segs[len(l.segs)-1]
	act.active = true
	act.mu.Lock()
	err := act.openLocked()
	end := act.meta.next
	act.mu.Unlock()
	if err != nil {
		return err
	}
	start := max(startCk, l.segs[0].base)
	if start > end {
		// The log lost data below its persisted start (a crash after
		// DeleteRecords): offsets must not be reused, so restart empty.
		l.cfg.Logger.Warn("log: data ends below log start offset, starting empty", "dir", l.dir, "start", start, "end", end)
		for _, s := range l.segs {
			if err := s.remove(); err != nil {
				return fmt.Errorf("log: %w", err)
			}
		}
		return l.startEmpty(start)
	}
	l.start, l.end = start, end
	l.settleWrittenLocked(end)
	if clean {
		rp = end
	}
	l.recoveryPoint = min(rp, end)
	l.syncedOffset = l.recoveryPoint
	return nil
}

// loadProducers restores producer state: the newest snapshot at or below
// the log end, then the batch headers after it.
func (l *Log) loadProducers() error {
	offs := l.openSnapshots
	l.openSnapshots = nil
	if err := removeSnapshotsIn(l.dir, offs, l.end); err != nil {
		return err
	}
	ps, aborted, from, err := loadLatestSnapshotIn(l.dir, offs, l.end)
	if err != nil {
		return err
	}
	l.snapshotAt, l.snapshotTime = from, time.Now()
	if from < 0 {
		from = 0
	}
	// The transaction index is rebuilt along: the snapshot's open and
	// aborted transactions, then the markers after it (txn.go).
	l.txns.reset(ps, aborted)
	err = l.forEachHeaderCtl(from, func(h record.Header, ctl int16, coordEpoch int32) {
		ps.apply(h)
		if h.Transactional() {
			l.txns.apply(h, ctl)
			ps.noteMarker(h, coordEpoch)
		}
	})
	if err != nil {
		return err
	}
	l.producers = ps
	return nil
}

// forEachHeader calls fn for every batch whose last offset is >= from, in
// offset order, reading headers only.
func (l *Log) forEachHeader(from int64, fn func(record.Header)) error {
	return l.forEachHeaderCtl(from, func(h record.Header, _ int16, _ int32) { fn(h) })
}

// forEachHeaderCtl is forEachHeader that also reads the control type of
// control batches (the only bodies it reads; they are a few dozen bytes);
// ctl (and the marker's coordinator epoch) are -1 for other batches.
func (l *Log) forEachHeaderCtl(from int64, fn func(record.Header, int16, int32)) error {
	l.mu.RLock()
	first, _ := l.segmentForLocked(from)
	segs := l.segs[first:]
	l.mu.RUnlock()
	interval := int64(l.config().IndexIntervalBytes)
	for _, s := range segs {
		rel := uint32(0)
		if from > s.base {
			rel = uint32(min(from-s.base, math.MaxUint32))
		}
		sf, pos, size, err := s.view(rel, interval)
		if err != nil {
			return err
		}
		sc := newHeaderScanner(sf.f, pos, size)
		for {
			h, at, err := sc.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				sf.release()
				return fmt.Errorf("log: segment %d: %w", s.base, err)
			}
			if h.LastOffset() >= from {
				ctl, ce := int16(-1), int32(-1)
				if h.Control() {
					buf := make([]byte, h.Size())
					if _, err := sf.f.ReadAt(buf, at); err == nil {
						ctl, ce = controlTypeOf(h, buf)
					}
				}
				fn(h, ctl, ce)
			}
		}
		sf.release()
	}
	return nil
}
