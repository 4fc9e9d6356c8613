package local

import (
	"context"
	"fmt"

	"github.com/vltava/vltava/plugins/sdk"
)

// Watch implements sdk.MetadataStore. Streams, history and fan-out live
// in s.watch (package watchhub), guarded by s.mu.
func (s *Store) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.FromRevision < 0 {
		return nil, fmt.Errorf("%w: FromRevision %d", sdk.ErrInvalidArgument, req.FromRevision)
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, sdk.ErrClosed
	}
	after := req.FromRevision
	if after == 0 {
		after = s.rev
	}
	w, err := s.watch.OpenLocked(req.Prefix, after)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return w.Attach(ctx), nil
}
