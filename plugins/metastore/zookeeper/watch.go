package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/vltava/vltava/plugins/sdk"
)

// watchBuffer is how many events a watch reads ahead of its consumer.
const watchBuffer = 256

// Watch follows the change log from FromRevision+1: it reads log/<next>
// and, when that entry does not exist yet, sets a ZooKeeper exists-watch
// on it and waits. The watch fires once; the loop then reads the entry
// and moves on to the next, so re-arming can neither skip nor repeat a
// revision, and a reconnect (or a new ZooKeeper session) only re-arms the
// same node.
func (s *Store) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if req.FromRevision < 0 {
		return nil, fmt.Errorf("zookeeper store: watch from %d: %w", req.FromRevision, sdk.ErrInvalidArgument)
	}
	from := req.FromRevision
	err := s.run(ctx, "watch", func(context.Context) error {
		if _, err := s.conn.Sync(s.p.root); err != nil {
			return err
		}
		floor, err := s.compactFloor()
		if err != nil {
			return err
		}
		if from == 0 {
			from, _, err = s.readRev()
			return err
		}
		if from < floor {
			return fmt.Errorf("zookeeper store: watch from %d: log compacted up to %d: %w", from, floor, sdk.ErrCompacted)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return nil, errClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	w := &stream{s: s, ctx: ctx, wctx: wctx, cancel: cancel, prefix: req.Prefix, out: make(chan item, watchBuffer), closed: make(chan struct{}), done: make(chan struct{})}
	go w.follow(from + 1)
	return w, nil
}

type item struct {
	ev  *sdk.WatchEvent
	err error
}

// stream is one watch. follow, its goroutine, is owned by the stream:
// Close stops it and waits; the store's Close stops it too.
type stream struct {
	s      *Store
	ctx    context.Context    // the caller's
	wctx   context.Context    // ends with ctx or Close: bounds the ZooKeeper calls
	cancel context.CancelFunc // ends wctx
	prefix string
	out    chan item

	closeOnce sync.Once
	closed    chan struct{}
	done      chan struct{}

	err error // owned by the Recv caller
}

func (w *stream) Recv() (*sdk.WatchEvent, error) {
	if w.err != nil {
		return nil, w.err
	}
	select {
	case <-w.closed:
		w.err = errClosed
		return nil, w.err
	case <-w.s.closed:
		w.err = errClosed
		return nil, w.err
	default:
	}
	select {
	case <-w.closed:
		w.err = errClosed
	case <-w.s.closed:
		w.err = errClosed
	case it := <-w.out:
		if it.err == nil {
			return it.ev, nil
		}
		w.err = it.err
	}
	return nil, w.err
}

func (w *stream) Close() error {
	w.closeOnce.Do(func() {
		close(w.closed)
		w.cancel()
	})
	<-w.done
	return nil
}

// stop reports why the stream must end now, or nil.
func (w *stream) stop() error {
	select {
	case <-w.closed:
		return errClosed
	case <-w.s.closed:
		return errClosed
	default:
	}
	return w.ctx.Err()
}

// follow delivers log entries from revision next on.
func (w *stream) follow(next int64) {
	defer w.s.wg.Done()
	defer close(w.done)
	defer w.cancel()
	var failingSince time.Time
	for {
		if err := w.stop(); err != nil {
			w.end(err)
			return
		}
		err := w.step(&next)
		if err == nil {
			failingSince = time.Time{}
			continue
		}
		if err := w.stop(); err != nil {
			w.end(err)
			return
		}
		if errors.Is(err, sdk.ErrCompacted) || errors.Is(err, sdk.ErrClosed) {
			w.end(err)
			return
		}
		// Connection trouble: the client reconnects on its own. Give up
		// when it lasts longer than a session timeout.
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) > w.s.cfg.SessionTimeout {
			w.end(fmt.Errorf("zookeeper store: watch: %v: %w", err, sdk.ErrUnavailable))
			return
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-w.wctx.Done():
		case <-w.s.closed:
		}
	}
}

// end hands the final error to Recv unless the stream was closed.
func (w *stream) end(err error) {
	if errors.Is(err, sdk.ErrClosed) {
		return
	}
	select {
	case w.out <- item{err: err}:
	case <-w.closed:
	case <-w.s.closed:
	}
}

// step delivers entry next if it exists, or waits for it to appear. Its
// ZooKeeper calls run through Store.run, bounded by request.timeout and
// by the stream's Close, so a hung connection cannot block Close.
func (w *stream) step(next *int64) error {
	var (
		data      []byte
		found     bool
		fired     <-chan zk.Event
		compacted int64 = -1
	)
	path := w.s.p.logEntry(*next)
	err := w.s.run(w.wctx, "watch", func(context.Context) error {
		d, _, err := w.s.conn.Get(path)
		if err == nil {
			data, found = d, true
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		ok, _, ch, err := w.s.conn.ExistsW(path)
		if err != nil || ok {
			return err // exists now: read it next time
		}
		// Missing: either not written yet (wait) or compacted away.
		cur, _, err := w.s.readRev()
		if err != nil {
			return err
		}
		if cur < *next {
			fired = ch
			return nil
		}
		floor, err := w.s.compactFloor()
		if err != nil {
			return err
		}
		if *next <= floor {
			compacted = floor
		}
		return nil // else written between the reads: read it next time
	})
	switch {
	case err != nil:
		return err
	case compacted >= 0:
		w.s.logger.Warn("zookeeper store: watch fell behind the change log's compaction; the watcher must list again", "prefix", w.prefix, "next", *next, "floor", compacted)
		return fmt.Errorf("zookeeper store: watch at revision %d: log compacted up to %d: %w", *next, compacted, sdk.ErrCompacted)
	case found:
		evs, err := decodeLog(data, *next)
		if err != nil {
			return err
		}
		for i := range evs {
			if !strings.HasPrefix(evs[i].Key, w.prefix) {
				continue
			}
			select {
			case w.out <- item{ev: &evs[i]}:
			case <-w.closed:
				return errClosed
			case <-w.s.closed:
				return errClosed
			case <-w.ctx.Done():
				return w.ctx.Err()
			}
		}
		*next++
		return nil
	case fired != nil:
		select {
		case <-fired:
			return nil
		case <-w.closed:
			return errClosed
		case <-w.s.closed:
			return errClosed
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
	}
	return nil
}
