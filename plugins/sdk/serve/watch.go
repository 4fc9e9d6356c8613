package serve

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// Watch (server side) opens the implementation's watch, sends the
// established marker (an event of type 0), then forwards every event until
// the watch ends or the host goes away. The marker lets the client's Watch
// return only once the watch exists, so "from now" means the same thing
// across the boundary as it does in process.
func (s *metadataStoreServer) Watch(req *pluginpb.WatchRequest, stream grpc.ServerStreamingServer[pluginpb.WatchEvent]) error {
	ctx := stream.Context()
	w, err := s.impl.Watch(ctx, &sdk.WatchRequest{Prefix: req.Prefix, FromRevision: req.FromRevision})
	if err != nil {
		return toStatus(err)
	}
	defer w.Close()
	if err := stream.Send(&pluginpb.WatchEvent{}); err != nil {
		return err
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return status.Error(codes.Canceled, ctx.Err().Error())
			}
			return toStatus(err)
		}
		if err := stream.Send(eventToPB(ev)); err != nil {
			return err
		}
	}
}

func (s *storeClient) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	cl, err := s.client()
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	st, err := cl.Watch(wctx, &pluginpb.WatchRequest{Prefix: req.Prefix, FromRevision: req.FromRevision})
	if err == nil {
		var first *pluginpb.WatchEvent
		if first, err = st.Recv(); err == nil && first.Type != 0 {
			cancel()
			return nil, fmt.Errorf("%w (%s)", errWatchProtocol, s.c)
		}
	}
	if err != nil {
		cancel()
		return nil, fromStatus(ctx, s.c, err)
	}
	w := &watchClient{store: s, ctx: ctx, cancel: cancel, st: st}
	if !s.track(w) {
		cancel()
		return nil, fmt.Errorf("serve: %s: %w", s.c, sdk.ErrClosed)
	}
	return w, nil
}

// watchClient is the host's end of a Watch stream.
type watchClient struct {
	store  *storeClient
	ctx    context.Context // the caller's Watch ctx
	cancel context.CancelFunc
	st     grpc.ServerStreamingClient[pluginpb.WatchEvent]

	mu  sync.Mutex
	err error // sticky: once set, every Recv returns it
}

func (w *watchClient) Recv() (*sdk.WatchEvent, error) {
	if err := w.stickyErr(); err != nil {
		return nil, err
	}
	ev, err := w.st.Recv()
	if err == nil {
		return eventFromPB(ev), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fromStatus(w.ctx, w.store.c, err)
		w.cancel()
	}
	return nil, w.err
}

func (w *watchClient) stickyErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// end fixes the stream's error (if not already fixed) and cancels it, so a
// blocked Recv returns err.
func (w *watchClient) end(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.cancel()
}

func (w *watchClient) Close() error {
	w.end(sdk.ErrClosed)
	w.store.untrack(w)
	return nil
}

func eventToPB(ev *sdk.WatchEvent) *pluginpb.WatchEvent {
	return &pluginpb.WatchEvent{
		Type: int32(ev.Type), Key: ev.Key, Value: ev.Value, ValueNil: ev.Value == nil,
		Version: ev.Version, Session: int64(ev.Session), Revision: ev.Revision,
	}
}

func eventFromPB(ev *pluginpb.WatchEvent) *sdk.WatchEvent {
	out := &sdk.WatchEvent{
		Type: sdk.EventType(ev.Type), Key: ev.Key, Value: ev.Value,
		Version: ev.Version, Session: sdk.SessionID(ev.Session), Revision: ev.Revision,
	}
	if out.Value == nil && !ev.ValueNil {
		out.Value = []byte{}
	}
	return out
}
