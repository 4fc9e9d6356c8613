package etcd

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vltava/vltava/plugins/sdk"
)

// Watch starts an etcd watch on the prefix from FromRevision+1. From 0
// first reads the current revision, so "from now" is fixed when Watch
// returns rather than when the server registers the watch.
func (s *Store) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if req.FromRevision < 0 {
		return nil, fmt.Errorf("etcd store: watch from %d: %w", req.FromRevision, sdk.ErrInvalidArgument)
	}
	from := req.FromRevision
	if from == 0 {
		rctx, cancel, err := s.begin(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := s.cli.Get(rctx, s.cfg.Prefix, clientv3.WithCountOnly())
		cancel()
		if err != nil {
			return nil, s.mapErr(ctx, "watch", err)
		}
		from = resp.Header.Revision
	}
	if s.isClosed() {
		return nil, errClosed
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w := &stream{
		s: s, ctx: ctx, cancel: cancel, closed: make(chan struct{}), prefix: req.Prefix,
		ch: s.cli.Watch(wctx, s.key(req.Prefix), clientv3.WithPrefix(), clientv3.WithRev(from+1)),
	}
	return w, nil
}

// stream adapts an etcd watch channel. The etcd client owns the goroutine
// feeding ch; cancel (Close, or the caller's ctx) ends it.
type stream struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	prefix string
	ch     clientv3.WatchChan

	closeOnce sync.Once
	closed    chan struct{}

	// Owned by the goroutine calling Recv.
	pending []*sdk.WatchEvent
	err     error
}

func (w *stream) Recv() (*sdk.WatchEvent, error) {
	for len(w.pending) == 0 {
		if w.err != nil {
			return nil, w.err
		}
		w.err = w.fill()
	}
	ev := w.pending[0]
	w.pending = w.pending[1:]
	return ev, nil
}

// fill waits for the next watch response and queues its events, or
// returns the error that ends the stream.
func (w *stream) fill() error {
	select {
	case <-w.closed:
		return errClosed
	case <-w.s.closed:
		return errClosed
	case resp, ok := <-w.ch:
		switch {
		case w.isClosed() || w.s.isClosed():
			return errClosed
		case w.ctx.Err() != nil:
			return w.ctx.Err()
		case !ok:
			return fmt.Errorf("etcd store: watch ended: %w", sdk.ErrUnavailable)
		case resp.CompactRevision != 0:
			w.s.logger.Warn("etcd store: watch fell behind a compaction; the watcher must list again and resynchronise",
				"prefix", w.prefix, "compact_revision", resp.CompactRevision)
			return fmt.Errorf("etcd store: watch: history compacted at revision %d: %w", resp.CompactRevision, sdk.ErrCompacted)
		case resp.Err() != nil:
			return w.s.mapErr(w.ctx, "watch", resp.Err())
		}
		for _, ev := range resp.Events {
			out := &sdk.WatchEvent{Key: string(ev.Kv.Key[len(w.s.cfg.Prefix):]), Revision: ev.Kv.ModRevision}
			if ev.Type == clientv3.EventTypePut {
				out.Type, out.Value, out.Version, out.Session = sdk.EventPut, ev.Kv.Value, ev.Kv.ModRevision, sdk.SessionID(ev.Kv.Lease)
				if out.Value == nil {
					out.Value = []byte{}
				}
			} else {
				out.Type = sdk.EventDelete
			}
			w.pending = append(w.pending, out)
		}
		return nil
	}
}

func (w *stream) isClosed() bool {
	select {
	case <-w.closed:
		return true
	default:
		return false
	}
}

func (w *stream) Close() error {
	w.closeOnce.Do(func() {
		close(w.closed)
		w.cancel()
	})
	return nil
}
