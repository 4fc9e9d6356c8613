package log

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Descriptors are a budget, not a per-partition cost. Every open segment
// .log file of the process, active ones included, is registered with one
// budget; when more are open than it allows, opening another closes the
// least recently used ones that nothing is using (no Slice, no append, no
// flush holds a reference). A closed segment reopens on its next append
// or read, so the partition count is bounded by disk and memory, not by
// RLIMIT_NOFILE.
//
// The budget is process-wide because descriptors are: brokers embedded in
// one process share it. Its default is half the process's RLIMIT_NOFILE
// (the other half is for connections, listeners, plugins and the
// metadata store); SetMaxOpenFiles changes it.
//
// Eviction is CLOCK (second chance): every use of a segment sets its used
// bit with one atomic store and no lock, and the sweep skips a segment
// once while clearing the bit. The sweep only TryLocks a segment's mutex,
// so it never waits while holding the budget's.
//
// Lock order: segment.mu before filesBudget.mu; a segment mutex taken
// while filesBudget.mu is held is only ever TryLocked.
type filesBudget struct {
	mu      sync.Mutex
	max     int
	open    []*segment // open segments; each one's slot is its index
	hand    int
	evicted atomic.Int64
}

var files = &filesBudget{max: defaultMaxOpenFiles()}

// minOpenFiles is the smallest budget: below it partitions would thrash.
const minOpenFiles = 16

func defaultMaxOpenFiles() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur > 1<<30 {
		return 1 << 20
	}
	return max(int(lim.Cur/2), minOpenFiles)
}

// SetMaxOpenFiles sets how many segment files the process keeps open at
// most (at least 16) and returns the previous budget.
func SetMaxOpenFiles(n int) int {
	files.mu.Lock()
	defer files.mu.Unlock()
	prev := files.max
	files.max = max(n, minOpenFiles)
	return prev
}

// OpenFiles reports the segment files open now, the budget, and how many
// were closed to stay within it since the process started.
func OpenFiles() (open, budget int, evicted int64) {
	files.mu.Lock()
	defer files.mu.Unlock()
	return len(files.open), files.max, files.evicted.Load()
}

// FilesUnderPressure reports whether the segment files open are near the
// budget (three quarters of it or more): readers should copy what they
// read rather than hold files open.
func FilesUnderPressure() bool {
	files.mu.Lock()
	defer files.mu.Unlock()
	return len(files.open)*4 >= files.max*3
}

// setFileLocked gives s the open file f (one reference: the segment's)
// and registers it, closing others if the budget is spent.
// REQUIRES: s.mu.
func (s *segment) setFileLocked(f *segFile) {
	s.file = f
	s.used.Store(true)
	files.opened(s)
}

// dropFileLocked releases the segment's reference to its file and
// unregisters it. REQUIRES: s.mu.
func (s *segment) dropFileLocked() error {
	if s.file == nil {
		return nil
	}
	files.closed(s)
	err := s.file.release()
	s.file = nil
	return err
}

func (b *filesBudget) opened(s *segment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.slot = len(b.open)
	b.open = append(b.open, s)
	if over := len(b.open) - b.max; over > 0 {
		b.evictLocked(over, s)
	}
}

func (b *filesBudget) closed(s *segment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(s)
}

// removeLocked unregisters s. REQUIRES: b.mu.
func (b *filesBudget) removeLocked(s *segment) {
	i := s.slot
	if i < 0 || i >= len(b.open) || b.open[i] != s {
		return
	}
	last := len(b.open) - 1
	b.open[i] = b.open[last]
	b.open[i].slot = i
	b.open[last] = nil
	b.open = b.open[:last]
	s.slot = -1
}

// evictLocked closes up to n idle segment files other than keep, two
// turns of the clock at most. A segment in use (busy mutex, or a Slice,
// append or flush holding its file) is skipped: the budget is exceeded
// for as long as that lasts rather than failing anyone.
// REQUIRES: b.mu.
func (b *filesBudget) evictLocked(n int, keep *segment) {
	for steps := 2 * len(b.open); n > 0 && steps > 0 && len(b.open) > 0; steps-- {
		if b.hand >= len(b.open) {
			b.hand = 0
		}
		s := b.open[b.hand]
		if s == keep || s.used.Swap(false) || !s.mu.TryLock() {
			b.hand++
			continue
		}
		if s.file == nil || s.file.refs.Load() != 1 {
			s.mu.Unlock()
			b.hand++
			continue
		}
		b.removeLocked(s) // moves another segment into this slot: stay on it
		s.file.release()
		s.file = nil
		if !s.active {
			s.meta.index, s.meta.tindex, s.loaded = nil, nil, false
		}
		s.mu.Unlock()
		b.evicted.Add(1)
		n--
	}
}
