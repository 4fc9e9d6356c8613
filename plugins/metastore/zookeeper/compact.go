package zookeeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/vltava/vltava/plugins/sdk"
)

// pruneEvery is how often (in revisions) a write wakes the pruner.
const pruneEvery = 64

func (s *Store) notePrune(rev int64) {
	if rev%pruneEvery != 0 {
		return
	}
	select {
	case s.pruneCh <- rev:
	default:
	}
}

// pruneLoop keeps the change log to log.retention revisions.
func (s *Store) pruneLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.closed:
			return
		case rev := <-s.pruneCh:
			floor := rev - int64(s.cfg.LogRetention)
			if floor <= 0 {
				continue
			}
			err := s.run(context.Background(), "prune log", func(ctx context.Context) error { return s.compactTo(ctx, floor) })
			if err != nil && !errors.Is(err, sdk.ErrClosed) {
				s.logger.Warn("zookeeper store: pruning the change log failed", "err", err)
			}
		}
	}
}

// Compact drops the change log at and below req.Revision (at most the
// current revision).
func (s *Store) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	if req.Revision <= 0 {
		return nil, fmt.Errorf("zookeeper store: compact at %d: %w", req.Revision, sdk.ErrInvalidArgument)
	}
	err := s.run(ctx, "compact", func(ctx context.Context) error {
		cur, _, err := s.readRev()
		if err != nil {
			return err
		}
		return s.compactTo(ctx, min(req.Revision, cur))
	})
	if err != nil {
		return nil, err
	}
	return &sdk.CompactResponse{}, nil
}

// compactTo raises the compaction floor (compare-and-set on the compact
// znode, so concurrent compactions agree), then deletes the log entries
// at and below it. Watches check the floor before they treat a missing
// entry as compacted.
func (s *Store) compactTo(ctx context.Context, floor int64) error {
	for {
		data, st, err := s.conn.Get(s.p.compact)
		if err != nil {
			return err
		}
		old, err := decodeRev(data)
		if err != nil {
			return err
		}
		if floor <= old {
			return nil
		}
		_, err = s.conn.Set(s.p.compact, encodeRev(floor), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return err
		}
		for r := old + 1; r <= floor; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.conn.Delete(s.p.logEntry(r), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		return nil
	}
}

// compactFloor reads the compaction floor.
func (s *Store) compactFloor() (int64, error) {
	data, _, err := s.conn.Get(s.p.compact)
	if err != nil {
		return 0, err
	}
	return decodeRev(data)
}
