package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// swapIn replaces the segments of group g (consecutive, inactive) by the
// cleaned file <base>.log.cleaned whose metadata is m. The steps, each
// safe to crash after (Open finishes or discards them, see doc.go):
//
//  1. <base>.log.cleaned is complete and fsynced (done by the caller);
//  2. rename it to <base>.log.swap and fsync the directory: from here
//     recovery completes the swap;
//  3. publish the new segment to readers (in memory only);
//  4. delete the old segments' index files and every old .log but base's;
//  5. rename <base>.log.swap over <base>.log and fsync the directory;
//  6. write the new index files.
//
// It returns errCleanAborted, removing the cleaned file, if the log
// changed since the pass began (retention, truncation, close).
func (l *Log) swapIn(g []*segment, m segMeta) error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	base := g[0].base
	stem := filepath.Join(l.dir, segName(base))
	cleanedPath, swapPath := stem+logSuffix+cleanedSuffix, stem+logSuffix+swapSuffix
	if err := l.dropCleanMarker(); err != nil {
		os.Remove(cleanedPath)
		return err
	}
	if !l.groupCurrent(g) {
		os.Remove(cleanedPath)
		return errCleanAborted
	}
	if err := runHook(l.dir, "cleaned"); err != nil {
		return err
	}
	if err := os.Rename(cleanedPath, swapPath); err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	if err := runHook(l.dir, "swap"); err != nil {
		return err
	}
	f, err := os.Open(swapPath) // the descriptor survives the rename below
	if err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	ns := newSegment(l.dir, base)
	sf := &segFile{f: f}
	sf.refs.Store(2) // the segment's and ours, held until the rename
	ns.mu.Lock()
	ns.setFileLocked(sf)
	ns.meta, ns.loaded, ns.lastUsed = m, true, time.Now().UnixNano()
	ns.mu.Unlock()
	defer sf.release()
	l.publishSwap(g, ns)
	var errs []error
	for _, s := range g {
		paths := []string{s.indexPath(), s.timePath()}
		if s.base != base {
			paths = append(paths, s.logPath())
		}
		for _, p := range paths {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	if err := runHook(l.dir, "deleted"); err != nil {
		return err
	}
	if err := os.Rename(swapPath, ns.logPath()); err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("log: clean: %w", err)
	}
	if err := runHook(l.dir, "renamed"); err != nil {
		return err
	}
	return ns.resetIndexFiles()
}

// groupCurrent reports whether g is still a run of inactive segments of
// the open log.
// REQUIRES: l.adminMu.
func (l *Log) groupCurrent(g []*segment) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return false
	}
	i := slices.Index(l.segs, g[0])
	if i < 0 || i+len(g) >= len(l.segs) {
		return false
	}
	return slices.Equal(l.segs[i:i+len(g)], g)
}

// publishSwap replaces g by ns in the segment list. The old segments are
// marked deleted first (under l.mu), so a reader holding the old list
// gets errSegmentGone and retries with the new one, and none can open
// the path <base>.log, which is about to hold the new file, through them.
// REQUIRES: l.adminMu.
func (l *Log) publishSwap(g []*segment, ns *segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range g {
		s.mu.Lock()
		s.deleted = true
		s.dropFileLocked() // Slices keep their own references
		s.mu.Unlock()
	}
	i := slices.Index(l.segs, g[0])
	segs := slices.Clone(l.segs[:i])
	segs = append(segs, ns)
	l.segs = append(segs, l.segs[i+len(g):]...)
	l.dirGen++
}

// finishSwaps runs at Open before segments are listed: it deletes
// unfinished cleaned files and completes every swap whose .swap file
// exists (steps 4 and 5 of swapIn). The .swap file was fsynced before it
// got its name, so its batches are trusted; old segments whose base lies
// within its offsets are the ones it replaces.
// ents is the directory's listing; changed says files were removed or
// renamed, so the caller must list it again.
func (l *Log) finishSwaps(ents []os.DirEntry) (changed bool, err error) {
	var bases []int64
	done := false
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, cleanedSuffix) {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return false, fmt.Errorf("log: %w", err)
			}
			done = true
		}
		if stem, ok := strings.CutSuffix(name, swapSuffix); ok {
			if b, ok := parseSegName(stem, logSuffix); ok {
				bases = append(bases, b)
			}
		}
	}
	for _, b := range bases {
		if err := l.finishSwap(ents, b); err != nil {
			return false, err
		}
		done = true
	}
	if done {
		if err := syncDir(l.dir); err != nil {
			return false, fmt.Errorf("log: %w", err)
		}
	}
	return done, nil
}

func (l *Log) finishSwap(ents []os.DirEntry, base int64) error {
	stem := filepath.Join(l.dir, segName(base))
	swapPath := stem + logSuffix + swapSuffix
	f, err := os.Open(swapPath)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("log: %w", err)
	}
	m, err := scanHeaders(f, fi.Size(), base, int64(l.cfg.IndexIntervalBytes))
	f.Close()
	if err != nil {
		return fmt.Errorf("log: swap file %d: %w", base, err)
	}
	l.cfg.Logger.Info("log: completing interrupted compaction swap", "dir", l.dir, "segment", base, "next", m.next)
	for _, e := range ents {
		name := e.Name()
		for _, suf := range []string{logSuffix, indexSuffix, timeSuffix} {
			b, ok := parseSegName(name, suf)
			if !ok || b < base || (b > base && b >= m.next) || (b == base && suf == logSuffix) {
				continue
			}
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("log: %w", err)
			}
		}
	}
	if err := os.Rename(swapPath, stem+logSuffix); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}
