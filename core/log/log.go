package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/core/record"
)

// Errors returned by Log methods. Corruption found in files wraps
// record.ErrCorrupt instead.
var (
	ErrOffsetOutOfRange     = errors.New("log: offset out of range")
	ErrOutOfOrderSequence   = errors.New("log: out of order sequence number")
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")
	ErrClosed               = errors.New("log: closed")
)

// Config holds the per-partition settings, named after Kafka's topic
// configs. Unlike a zero Config suggests, RetentionMs and RetentionBytes of
// 0 are real limits (delete everything but the active segment); use -1 to
// keep data, or start from DefaultConfig.
type Config struct {
	SegmentBytes       int64 // segment.bytes: roll when the active segment would exceed it
	SegmentMs          int64 // segment.ms: roll when the active segment's first batch is older than this; <=0 never
	RetentionMs        int64 // retention.ms, -1 = keep forever
	RetentionBytes     int64 // retention.bytes, -1 = no size limit
	IndexIntervalBytes int32 // index.interval.bytes (4096)
	FlushMessages      int64 // flush.messages: fsync when this many records are unflushed; 1 = fsync before Append returns; <=0 page cache only
	FlushMs            int64 // flush.ms: Maintain fsyncs if the oldest unflushed append is older than this; <=0 never

	// Compaction (see Clean). Compact is cleanup.policy containing
	// "compact"; retention still applies through RetentionMs and
	// RetentionBytes, so compact,delete sets both.
	Compact                bool
	DeleteRetentionMs      int64   // delete.retention.ms: tombstones survive at least this long after the cleaner first passes them
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio: clean once dirty bytes / cleanable bytes reach this
	MinCompactionLagMs     int64   // min.compaction.lag.ms: segments with newer records stay dirty
	MaxCompactionLagMs     int64   // max.compaction.lag.ms: clean regardless of the ratio once dirty data is this old; <=0 never
	Logger                 *slog.Logger

	// OnStorageError, if set, is called once when an I/O error takes the
	// log offline (see ErrStorage), with the partition directory and the
	// error. It runs on the goroutine that hit the error, possibly with
	// the log's locks held: it must not block or call the log.
	OnStorageError func(dir string, err error)

	// Syncer, if set, fsyncs the appends that wait for durability
	// (flush.messages=1) on its workers, so the partitions of one
	// request are synced at once; nil: each waiter fsyncs itself. One per
	// log directory, closed by its owner after the logs.
	Syncer *Syncer
}

// DefaultConfig returns Kafka's defaults: 1 GiB segments rolled weekly,
// seven days of retention without a size limit, page-cache durability.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 3600 * 1000,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		IndexIntervalBytes:     4096,
		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

func (c Config) normalized() Config {
	if c.SegmentBytes <= 0 || c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Timing of the background work driven by Maintain.
const (
	idleClose          = 5 * time.Second  // close inactive segment files unused this long
	checkpointInterval = 10 * time.Second // advance the recovery point after data-only fsyncs
	snapshotInterval   = 10 * time.Second // least time between the producer snapshots Maintain's flushes write
)

// Log is one partition's durable log: a directory of segments. Append is
// serialised; any number of Reads run concurrently with it and never wait
// for its I/O.
//
// Lock order: cleanMu, adminMu, appendMu, flushMu, mu, then segment locks.
type Log struct {
	dir string

	adminMu  sync.Mutex     // serialises retention, DeleteRecords, Truncate, Close
	appendMu sync.Mutex     // one writer of the active segment
	splitBuf []pendingBatch // reused by splitBatchesLocked; guarded by appendMu
	flushMu  sync.Mutex     // serialises fsyncs and recovery-point checkpoints; Truncate holds it too
	cleanMu  sync.Mutex     // one Clean pass at a time; taken before adminMu

	epochs    epochCache                   // leader-epoch cache; own locks, taken after all others
	producers producerState                // guarded by appendMu
	prunedAt  int64                        // log start offset producers were last pruned at; guarded by appendMu
	txns      txnIndex                     // open and aborted transactions (txn.go)
	guards    map[int64]*VerificationGuard // transaction checks in flight, by producer (txn.go); guarded by appendMu
	lastWrite writtenAt                    // where the last append's bytes start; guarded by appendMu
	// snapshotAt is the offset of the newest producer snapshot this
	// process wrote or Open loaded (-1: none), snapshotTime when; both
	// guarded by appendMu (flushWithSnapshot).
	snapshotAt   int64
	snapshotTime time.Time

	mu              sync.RWMutex
	cfg             Config
	segs            []*segment // ascending base; last is active; replaced, never modified in place
	start           int64      // log start offset
	end             int64      // log end offset: everything below is visible
	written         int64      // offset after the last batch written (>= end; groupcommit.go)
	writtenAppended int64      // appended, counting written batches not yet published
	writtenPos      writtenAt  // position after the last written batch
	publishedPos    writtenAt  // position after the last published batch
	recoveryPoint   int64      // all data and indexes below are fsynced; checkpointed
	// rpOnDisk is the offset the recovery-point checkpoint is known to
	// hold (0 also when there is none), -1 when unknown: Flush writes the
	// checkpoint only when it would change.
	rpOnDisk       atomic.Int64
	syncedOffset   int64 // all data below is fsynced (>= recoveryPoint)
	appended       int64 // records appended since Open
	synced         int64 // value of appended covered by syncedOffset
	unflushedSince int64 // unix ms of the oldest unsynced append, 0 if none
	lastCheckpoint time.Time
	dirGen         int64 // bumped when segment files are created or removed
	dirSyncedGen   int64 // dirGen at the last directory fsync
	cleaned        int64 // cleaner checkpoint: offsets below were compacted once; -1 unknown
	horizonDue     int64 // unix ms of the earliest delete horizon of a cleaned tombstone, 0 if none
	changed        chan struct{}
	changedTaken   atomic.Bool // Changed handed out changed since it was last replaced (set under mu read, read under mu write)
	closed         bool
	marker         markerGuard // the clean-shutdown marker awaiting deletion (cleanmarker.go)
	openSnapshots  []int64     // the snapshot offsets Open listed, for loadProducers; nil after
	failed         error       // set once by fail: the log is offline (wraps ErrStorage)
	durable        sync.Cond   // on mu (write): broadcast after each Syncer pass over the log
	syncQueued     bool        // in its Syncer's queue; guarded by that Syncer's mu
}

// StartOffset returns the log start offset: the first readable offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset returns the log end offset: the offset the next record gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// Size returns the bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	segs := l.segs
	l.mu.RUnlock()
	var n int64
	for _, s := range segs {
		sz, _, _ := s.stats()
		n += sz
	}
	return n
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// SetConfig replaces the configuration; it applies from the next call.
// A nil Logger, OnStorageError or Syncer keeps the current one.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cfg.Logger == nil {
		cfg.Logger = l.cfg.Logger
	}
	if cfg.OnStorageError == nil {
		cfg.OnStorageError = l.cfg.OnStorageError
	}
	if cfg.Syncer == nil {
		cfg.Syncer = l.cfg.Syncer
	}
	l.cfg = cfg.normalized()
}

func (l *Log) config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// Changed returns a channel that is closed the next time EndOffset
// advances. Each call returns the current channel.
func (l *Log) Changed() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	l.changedTaken.Store(true)
	return l.changed
}

// signalChangedLocked wakes every holder of the Changed channel. A
// channel nobody took is kept (nobody can be waiting on it), so an append
// nobody waits for allocates none. REQUIRES: l.mu (write).
func (l *Log) signalChangedLocked() {
	if l.changedTaken.Load() {
		close(l.changed)
		l.changed = make(chan struct{})
		l.changedTaken.Store(false)
	}
}

// segmentFor returns the segment holding offset: the last one whose base
// offset is <= offset, or the first segment.
// REQUIRES: l.mu (read).
func (l *Log) segmentForLocked(offset int64) (int, *segment) {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	if i > 0 {
		i--
	}
	return i, l.segs[i]
}

func (l *Log) active() *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[len(l.segs)-1]
}

// Close flushes all data, writes the producer snapshot and the clean
// shutdown marker, and closes the files. Open Slices stay readable.
func (l *Log) Close() error {
	l.adminMu.Lock()
	defer l.adminMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if l.marker.current && l.marker.pending.Load() {
		// Nothing changed since Open trusted the marker: it, the producer
		// snapshot and the checkpoints still describe the files, so a
		// broker restarted and stopped without writes (or its idle
		// partitions) writes and fsyncs nothing.
		l.mu.Lock()
		l.closed = true
		segs := l.segs
		l.mu.Unlock()
		var err error
		for _, s := range segs {
			if cerr := s.closeFile(); err == nil {
				err = cerr
			}
		}
		return err
	}
	err := l.Flush()
	l.mu.Lock()
	l.closed = true
	end, segs := l.end, l.segs
	l.mu.Unlock()
	for _, s := range segs {
		l.releasePreallocLocked(s)
	}
	if err == nil {
		err = l.writeCleanState(end)
	}
	for _, s := range segs {
		if cerr := s.closeFile(); err == nil {
			err = cerr
		}
	}
	return err
}

// writeCleanState writes what a clean Open trusts: the producer snapshot
// at end, then the clean-shutdown marker with the segment table, both
// durable. The caller holds appendMu and adminMu (nothing changes the
// files meanwhile) and has flushed everything below end.
func (l *Log) writeCleanState(end int64) error {
	// A log that never held a record has no producer state to keep, and
	// with no snapshot Open reads the (no) batches from offset 0.
	if end > 0 || len(l.producers) > 0 {
		if err := writeSnapshot(l.dir, end, l.producers, l.txns.snapshot(l.StartOffset()), true); err != nil {
			return err
		}
		l.snapshotAt, l.snapshotTime = end, time.Now()
	}
	return writeFileAtomic(l.dir, cleanShutdownFile, encodeCleanMarker(end, l.cleanTable()), true)
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
		l.config().Logger.Warn("log: close before delete failed", "dir", l.dir, "err", err)
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("log: delete: %w", err)
	}
	return nil
}

// checkOpen returns ErrClosed after Close, and the failure (wrapping
// ErrStorage) of a log taken offline.
func (l *Log) checkOpen() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// headerAt reads the header of the batch at pos of f.
func headerAt(f *os.File, pos int64) (record.Header, error) {
	var b [record.HeaderSize]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return record.Header{}, fmt.Errorf("log: read header: %w", err)
	}
	return record.ParseHeader(b[:])
}
