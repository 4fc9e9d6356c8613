package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrStorage marks an I/O failure of the log directory (a failed write or
// fsync). As in Kafka, such a log is offline for good: its data may differ
// from what the page cache showed, so every later Append, Read, Flush and
// Truncate fails with an error wrapping ErrStorage until the process
// restarts and recovery rescans the files. The broker answers
// KAFKA_STORAGE_ERROR and takes the directory offline.
var ErrStorage = errors.New("log: storage error")

// Err returns the I/O failure that took the log offline (wrapping
// ErrStorage), or nil.
func (l *Log) Err() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed
}

// fail takes the log offline after an I/O error in op: it records the
// first failure, logs it, tells Config.OnStorageError, and returns the
// error wrapping ErrStorage. Records appended but not yet published stay
// invisible, and nothing below is read again.
func (l *Log) fail(op string, err error) error {
	if errors.Is(err, ErrStorage) {
		return err
	}
	ferr := fmt.Errorf("%w: %s: %s: %w", ErrStorage, l.dir, op, err)
	l.mu.Lock()
	first := l.failed == nil
	if first {
		l.failed = ferr
	}
	cfg := l.cfg
	l.mu.Unlock()
	if first {
		cfg.Logger.Error("log: I/O error, log offline: its data is no longer served", "dir", l.dir, "op", op, "err", err)
		if cfg.OnStorageError != nil {
			cfg.OnStorageError(l.dir, ferr)
		}
	}
	return ferr
}

// syncFaults are the failures InjectSyncFailure arranged, by directory.
var syncFaults struct {
	mu   sync.Mutex
	dirs map[string]error
	any  atomic.Bool // fast path: no fault injected
}

// InjectSyncFailure makes every fsync of a file or directory under dir
// fail with err until the returned function is called. It exists for the
// tests of packages built on the log (the broker's handling of a failed
// disk); production code never calls it, and without it the check costs
// one atomic load per fsync.
func InjectSyncFailure(dir string, err error) (undo func()) {
	dir = filepath.Clean(dir)
	syncFaults.mu.Lock()
	defer syncFaults.mu.Unlock()
	if syncFaults.dirs == nil {
		syncFaults.dirs = map[string]error{}
	}
	syncFaults.dirs[dir] = err
	syncFaults.any.Store(true)
	return func() {
		syncFaults.mu.Lock()
		defer syncFaults.mu.Unlock()
		delete(syncFaults.dirs, dir)
		syncFaults.any.Store(len(syncFaults.dirs) > 0)
	}
}

// injectedSyncFailure returns the failure injected for path, if any.
func injectedSyncFailure(path string) error {
	if !syncFaults.any.Load() {
		return nil
	}
	syncFaults.mu.Lock()
	defer syncFaults.mu.Unlock()
	for dir, err := range syncFaults.dirs {
		if path == dir || strings.HasPrefix(path, dir+string(os.PathSeparator)) {
			return err
		}
	}
	return nil
}

// TakeOffline takes the log offline because its directory failed (another
// log of the same directory hit an I/O error): every later Append, Read,
// Flush and Truncate fails with an error wrapping ErrStorage and cause.
// OnStorageError is not called.
func (l *Log) TakeOffline(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %s: log directory offline: %w", ErrStorage, l.dir, cause)
	}
}
