package broker

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// A log directory goes offline, as in Kafka, when an I/O error (a failed
// write or fsync) hits any partition log in it: the log that failed stops
// serving at once (core/log: ErrStorage), and the broker takes every other
// partition of the directory offline with it, so produce and fetch answer
// KAFKA_STORAGE_ERROR and nothing that failed to sync is read or counted
// toward the high watermark. The broker has one log directory (log.dirs),
// so, as Kafka halts a broker whose log directories are all offline, an
// offline directory ends the broker: Failed is closed and its owner (the
// daemon) closes it, which ends the broker's session so that the
// controller moves its leaderships, and exits non-zero.

// logDirState records the failure of the broker's log directory. The zero
// value is ready to use.
type logDirState struct {
	initOnce sync.Once
	failOnce sync.Once
	failedCh chan struct{}
	err      atomic.Pointer[error]
}

func (s *logDirState) ch() chan struct{} {
	s.initOnce.Do(func() { s.failedCh = make(chan struct{}) })
	return s.failedCh
}

// Failed returns a channel closed when the broker's log directory went
// offline after an I/O error. The broker then serves no data; its owner
// should Close it (ending its cluster session so leadership moves) and
// stop. Err says why.
func (b *Broker) Failed() <-chan struct{} { return b.dirs.ch() }

// Err returns the failure that closed Failed, or nil.
func (b *Broker) Err() error {
	if e := b.dirs.err.Load(); e != nil {
		return *e
	}
	return nil
}

// logDirFailed is every partition log's log.Config.OnStorageError. It runs
// on the goroutine whose I/O failed, possibly holding that log's locks: it
// only marks the other logs offline and signals Failed.
func (b *Broker) logDirFailed(dir string, err error) {
	b.dirs.failOnce.Do(func() {
		e := fmt.Errorf("broker: log directory %s offline after an I/O error in partition %s: %w", b.cfg.LogDirs, filepath.Base(dir), err)
		b.dirs.err.Store(&e)
		b.logger.Error("broker: log directory offline; it is the broker's only one, so the broker stops",
			"log_dir", b.cfg.LogDirs, "partition", filepath.Base(dir), "err", err)
		for _, p := range b.meta.Load().allPartitions() {
			p.log.TakeOffline(e)
		}
		close(b.dirs.ch())
	})
}
