package log

import (
	"sync"

	"github.com/vltava/vltava/core/invariant"
)

// Syncer makes appends durable for every log of one log directory that
// fsyncs before acknowledging (flush.messages=1): a few worker goroutines
// take logs with appends waiting for an fsync, in the order they asked,
// fdatasync each one's new data and publish what it covered (the group
// commit of groupcommit.go, run off the appender's goroutine).
//
// Why workers and not the waiter's own goroutine: a produce request
// writes every partition it carries and then waits for all of them
// (AppendOptions.DeferDurable), so the fsyncs of one request's partitions
// run at once instead of one after the other. Concurrent fdatasyncs of
// several files on one file system share journal commits: on the
// development VM (ext4) six files synced at once moved ≈ 1.5× the bytes of
// the same six synced in turn (BENCHMARKS.md, "Issue 15, session 4").
// A log is in the queue at most once; appends that arrive while its fsync
// runs are covered by the next one, so one fsync serves every batch that
// came in during the previous one, per partition, and the partitions'
// fsyncs overlap. The workers bound how many threads block in fsync.
//
// Lock order: a Syncer's mu is taken alone, never with a log's locks.
type Syncer struct {
	mu      sync.Mutex
	work    sync.Cond // signalled when queue grows or the syncer closes
	queue   []*Log    // logs with appends awaiting an fsync; each at most once (Log.syncQueued)
	head    int       // queue[head:] is pending
	closed  bool
	workers sync.WaitGroup
}

// syncerWorkers is how many fsyncs a Syncer runs at once.
const syncerWorkers = ioWorkers

// NewSyncer starts a syncer for one log directory. Its owner closes it
// after the logs that use it (Config.Syncer).
func NewSyncer() *Syncer {
	s := &Syncer{}
	s.work.L = &s.mu
	for range syncerWorkers {
		s.workers.Go(s.run)
	}
	return s
}

// Close stops the workers once the queue is empty and waits for them. A
// log that needs an fsync afterwards does it on its waiter's goroutine.
func (s *Syncer) Close() {
	s.mu.Lock()
	s.closed = true
	s.work.Broadcast()
	s.mu.Unlock()
	s.workers.Wait()
}

// enqueue asks for an fsync of l's written appends; false when the syncer
// is closed.
func (s *Syncer) enqueue(l *Log) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if !l.syncQueued {
		l.syncQueued = true
		s.queue = append(s.queue, l)
		s.work.Signal()
	}
	return true
}

// next waits for a queued log; nil once closed and drained.
func (s *Syncer) next() *Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.head == len(s.queue) && !s.closed {
		s.work.Wait()
	}
	if s.head == len(s.queue) {
		return nil
	}
	l := s.queue[s.head]
	s.queue[s.head] = nil
	s.head++
	switch {
	case s.head == len(s.queue):
		s.queue, s.head = s.queue[:0], 0
	case s.head > len(s.queue)/2:
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	if invariant.Enabled {
		invariant.Check(l.syncQueued, "log %s: taken from the syncer's queue but not marked queued", l.dir)
	}
	// INVARIANT: a log is queued at most once; cleared here, before its
	// fsync reads the written end, so an append after this point queues
	// it again and is covered by that next fsync.
	l.syncQueued = false
	return l
}

func (s *Syncer) run() {
	for l := s.next(); l != nil; l = s.next() {
		l.syncForWaiters()
	}
}
