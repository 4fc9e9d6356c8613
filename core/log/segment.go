package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// File name suffixes of a segment.
const (
	logSuffix      = ".log"
	indexSuffix    = ".index"
	timeSuffix     = ".timeindex"
	snapshotSuffix = ".snapshot"
)

// errSegmentGone is returned internally when a segment was deleted between
// finding it and using it; callers re-resolve the offset.
var errSegmentGone = errors.New("log: segment deleted")

// segName is the file name stem of the segment or snapshot at off.
func segName(off int64) string { return fmt.Sprintf("%020d", off) }

// parseSegName parses "<20 digits><suffix>".
func parseSegName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	off, err := strconv.ParseInt(stem, 10, 64)
	return off, err == nil && off >= 0
}

// segFile is a reference-counted open .log file. The segment holds one
// reference while it keeps the file open; every Slice holds one more. The
// descriptor closes when the last reference goes, so a Slice stays readable
// after its segment was closed for idleness or deleted by retention.
type segFile struct {
	f    *os.File
	refs atomic.Int32
}

func (sf *segFile) retain() { sf.refs.Add(1) }

func (sf *segFile) release() error {
	if sf.refs.Add(-1) == 0 {
		return sf.f.Close()
	}
	return nil
}

// segment is one .log file with its .index and .timeindex.
//
// Lock order: Log.mu before idxMu before mu.
type segment struct {
	base int64
	stem string // dir/<base:%020d>

	idxMu    sync.Mutex // serialises writes of the index files
	idxDirty bool       // index files written but not fsynced; guarded by idxMu
	// noIdxFiles says the index files are known not to exist (createSegment
	// removed them and none was written since), so persistIndex need not
	// create empty ones. Guarded by idxMu.
	noIdxFiles bool

	mu       sync.Mutex
	file     *segFile // nil while closed
	meta     segMeta  // index/tindex valid only while loaded
	loaded   bool
	active   bool
	deleted  bool
	lastUsed int64 // unix nanoseconds of the last acquire

	// used is set by every use of the file and cleared by the descriptor
	// budget's clock sweep (files.go); slot is the segment's index in the
	// budget's list while its file is open (guarded by filesBudget.mu).
	used atomic.Bool
	slot int

	// Entries of meta.index / meta.tindex already in the files. Guarded
	// by mu, changed only with idxMu held too.
	idxOnDisk, tOnDisk int

	// tail is the active segment's tail cache (tail.go), nil when none.
	// Guarded by mu.
	tail *tailCache

	// preallocEnd is where the blocks this process reserved in the file
	// end (prealloc.go; 0: none). Guarded by the log's appendMu; only a
	// hint — the file's size, not this, says where the data ends.
	preallocEnd int64
}

func newSegment(dir string, base int64) *segment {
	return &segment{base: base, stem: filepath.Join(dir, segName(base)), slot: -1}
}

func (s *segment) logPath() string   { return s.stem + logSuffix }
func (s *segment) indexPath() string { return s.stem + indexSuffix }
func (s *segment) timePath() string  { return s.stem + timeSuffix }

// createSegment makes an empty active segment at base, replacing a .log
// file left with that name and removing its index files.
func createSegment(dir string, base, interval int64) (*segment, error) {
	s := newSegment(dir, base)
	f, err := os.OpenFile(s.logPath(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: create segment: %w", err)
	}
	for _, p := range []string{s.indexPath(), s.timePath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.Close()
			return nil, fmt.Errorf("log: create segment: %w", err)
		}
	}
	// The index files are created with their first entries (persistIndex);
	// creating files is the expensive part of making a partition.
	sf := &segFile{f: f}
	sf.refs.Store(1)
	s.noIdxFiles = true
	s.mu.Lock()
	s.setFileLocked(sf)
	s.meta = newSegMeta(base, interval)
	s.loaded, s.active = true, true
	s.mu.Unlock()
	return s, nil
}

// openLocked opens the .log file if it is closed.
// REQUIRES: s.mu.
func (s *segment) openLocked() error {
	if s.deleted {
		return errSegmentGone
	}
	if s.file != nil {
		return nil
	}
	flag := os.O_RDONLY
	if s.active {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(s.logPath(), flag, 0)
	if err != nil {
		return fmt.Errorf("log: open segment: %w", err)
	}
	sf := &segFile{f: f}
	sf.refs.Store(1)
	s.setFileLocked(sf)
	return nil
}

// acquire returns the open .log file with a reference the caller releases.
func (s *segment) acquire() (*segFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, err
	}
	s.file.retain()
	s.used.Store(true)
	s.lastUsed = time.Now().UnixNano()
	return s.file, nil
}

// loadLocked reads the index files of an inactive segment, rebuilding
// them from batch headers when they are missing or fail their checks.
// REQUIRES: s.mu, s.file open.
func (s *segment) loadLocked(interval int64) error {
	if s.loaded {
		return nil
	}
	ib, err1 := os.ReadFile(s.indexPath())
	tb, err2 := os.ReadFile(s.timePath())
	var idx []offsetEntry
	var tidx []timeEntry
	err := errors.Join(err1, err2)
	if err == nil {
		idx, err = decodeOffsetIndex(ib, s.meta.size)
	}
	if err == nil {
		tidx, err = decodeTimeIndex(tb)
	}
	if err != nil {
		m, serr := scanHeaders(s.file.f, s.meta.size, s.base, interval)
		if serr != nil {
			return fmt.Errorf("log: segment %d: %w", s.base, serr)
		}
		m.maybeAddTime()
		idx, tidx = m.index, m.tindex
		writeIndexFiles(s, m) // best effort: a failure only costs a rebuild next time
	}
	s.meta.index, s.meta.tindex = idx, tidx
	s.idxOnDisk, s.tOnDisk = len(idx), len(tidx)
	s.loaded = true
	return nil
}

// writeIndexFiles replaces both index files of s with m's entries.
func writeIndexFiles(s *segment, m segMeta) error {
	dir, base := filepath.Split(s.stem)
	err := writeFileAtomic(dir, base+indexSuffix, encodeOffsetEntries(nil, m.index), false)
	if err == nil {
		err = writeFileAtomic(dir, base+timeSuffix, encodeTimeEntries(nil, m.tindex), false)
	}
	return err
}

// view prepares a read at relative offset rel: it returns the open file
// (with a reference), the position to start scanning at, and the segment's
// size of fully written batches.
func (s *segment) view(rel uint32, interval int64) (*segFile, int64, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, 0, 0, err
	}
	if err := s.loadLocked(interval); err != nil {
		return nil, 0, 0, err
	}
	s.file.retain()
	s.used.Store(true)
	s.lastUsed = time.Now().UnixNano()
	return s.file, lookupOffset(s.meta.index, rel), s.meta.size, nil
}

// timeView is view for a timestamp search: it also returns the position
// from which a scan for the first batch with max timestamp >= ts may start.
func (s *segment) timeView(ts int64, interval int64) (*segFile, int64, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, 0, 0, err
	}
	if err := s.loadLocked(interval); err != nil {
		return nil, 0, 0, err
	}
	pos := int64(0)
	if rel, ok := lookupTime(s.meta.tindex, ts); ok {
		pos = lookupOffset(s.meta.index, rel)
	}
	s.file.retain()
	s.used.Store(true)
	s.lastUsed = time.Now().UnixNano()
	return s.file, pos, s.meta.size, nil
}

// stats returns size and max timestamp info.
func (s *segment) stats() (size, maxTs, maxTsOff int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta.size, s.meta.maxTs, s.meta.maxTsOff
}

// closeIfIdle closes a segment's file when no Slice, append or flush uses
// it and it was not acquired since idleBefore; an inactive segment drops
// its indexes too (the active one's live in memory only and stay). The
// active segment of an idle partition closes like the others and reopens
// on its next append.
func (s *segment) closeIfIdle(idleBefore int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropTailIfIdleLocked(idleBefore)
	if s.file == nil || s.file.refs.Load() != 1 || s.lastUsed > idleBefore {
		return nil
	}
	err := s.dropFileLocked()
	if !s.active {
		s.meta.index, s.meta.tindex, s.loaded = nil, nil, false
	}
	return err
}

// closeFile drops the segment's own reference to its file.
func (s *segment) closeFile() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropFileLocked()
}

// remove marks the segment deleted, drops its file reference and unlinks
// its files. Open Slices keep reading the unlinked file.
func (s *segment) remove() error {
	s.mu.Lock()
	s.deleted, s.tail = true, nil
	err := s.dropFileLocked()
	s.mu.Unlock()
	for _, p := range []string{s.logPath(), s.indexPath(), s.timePath()} {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// persistIndex writes index entries not yet in the files and, if durable,
// fsyncs the files when they have unsynced writes.
func (s *segment) persistIndex(durable bool) error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	s.mu.Lock()
	if s.deleted || !s.loaded {
		s.mu.Unlock()
		return s.syncIndexLocked(durable)
	}
	idxAt, tAt := s.idxOnDisk, s.tOnDisk
	idx, tidx := s.meta.index[idxAt:], s.meta.tindex[tAt:]
	s.mu.Unlock()
	// Appended entries are never modified, so they can be encoded without
	// the lock.
	// An empty index file is written only to cut one that may hold
	// stale entries; none is created for a segment that never had one.
	if len(idx) > 0 || (idxAt == 0 && !s.noIdxFiles) {
		if err := appendFile(s.indexPath(), int64(idxAt)*offsetEntrySize, encodeOffsetEntries(nil, idx)); err != nil {
			return err
		}
	}
	if len(tidx) > 0 || (tAt == 0 && !s.noIdxFiles) {
		if err := appendFile(s.timePath(), int64(tAt)*timeEntrySize, encodeTimeEntries(nil, tidx)); err != nil {
			return err
		}
	}
	if len(idx) > 0 || len(tidx) > 0 {
		s.noIdxFiles = false
	}
	s.mu.Lock()
	s.idxOnDisk, s.tOnDisk = idxAt+len(idx), tAt+len(tidx)
	s.mu.Unlock()
	if len(idx)+len(tidx) > 0 {
		s.idxDirty = true
	}
	return s.syncIndexLocked(durable)
}

// syncIndexLocked fsyncs the index files if durable and they have
// unsynced writes.
// REQUIRES: s.idxMu.
func (s *segment) syncIndexLocked(durable bool) error {
	if durable && s.idxDirty {
		if err := errors.Join(syncPath(s.indexPath()), syncPath(s.timePath())); err != nil {
			return fmt.Errorf("log: sync index: %w", err)
		}
		s.idxDirty = false
	}
	return nil
}

// resetIndexFiles rewrites both index files from the segment's current
// entries (after a truncation or rebuild).
func (s *segment) resetIndexFiles() error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	s.mu.Lock()
	m := s.meta
	s.mu.Unlock()
	if err := writeIndexFiles(s, m); err != nil {
		return err
	}
	s.mu.Lock()
	s.idxOnDisk, s.tOnDisk = len(m.index), len(m.tindex)
	s.mu.Unlock()
	s.idxDirty = true
	return nil
}

// appendFile writes data at position at of the file at path, creating it,
// and cuts anything beyond so the file is sized to its content.
func appendFile(path string, at int64, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if len(data) > 0 {
		_, err = f.WriteAt(data, at)
	}
	if err == nil {
		err = f.Truncate(at + int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: write index: %w", err)
	}
	return nil
}
