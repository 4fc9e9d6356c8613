package raft

import (
	"context"
	"fmt"
	"slices"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/vltava/vltava/plugins/sdk"
)

// joinRetryMax caps the back-off between a non-voter's join attempts.
const joinRetryMax = time.Second

// joinLoop is owned by the Store (s.wg; it ends when s.ctx does): it asks
// the voters in turn to add this node as a non-voter at s.addr, until one
// accepts. A node that is already a non-voter at that address is
// accepted without a configuration change, so a restart rejoins cheaply.
func (s *Store) joinLoop() {
	defer s.wg.Done()
	ids := make([]int32, 0, len(s.cfg.Voters))
	for id := range s.cfg.Voters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	backoff := 20 * time.Millisecond
	var lastWarn time.Time
	for i := 0; ; i++ {
		via := s.cfg.Voters[ids[i%len(ids)]]
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.LeaderWait)
		_, err := s.forward(ctx, via, pathJoin, &fwdRequest{NodeID: s.cfg.NodeID, Addr: string(s.addr)})
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		if err == nil {
			s.log.Info("raft: member of the quorum as a non-voter", "address", string(s.addr), "via", via)
			return
		}
		if time.Since(lastWarn) >= quorumWarnEvery {
			s.log.Warn("raft: non-voter not added yet; retrying", "via", via, "err", err)
			lastWarn = time.Now()
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, joinRetryMax)
	}
}

// addNonvoter makes node id at addr a non-voter of the quorum, on the
// leader (forwarded if need be). A voter's ID is refused: a
// misconfigured broker must not take over a voter's address.
func (s *Store) addNonvoter(ctx context.Context, id int32, addr string) error {
	return s.onLeader(ctx, func() error {
		f := s.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return s.raftErr(err)
		}
		for _, srv := range f.Configuration().Servers {
			if srv.ID != serverID(id) {
				continue
			}
			if srv.Suffrage == hraft.Voter {
				return fmt.Errorf("%w: raft: node %d is a voter; a non-voter needs a node ID of its own", sdk.ErrInvalidArgument, id)
			}
			if srv.Address == hraft.ServerAddress(addr) {
				return nil // already a member there
			}
		}
		if err := s.raft.AddNonvoter(serverID(id), hraft.ServerAddress(addr), 0, applyEnqueueTimeout).Error(); err != nil {
			return s.raftErr(err)
		}
		s.log.Info("raft: added a non-voter", "id", id, "address", addr)
		return nil
	}, func(ctx context.Context, leader string) error {
		_, err := s.forward(ctx, leader, pathJoin, &fwdRequest{NodeID: id, Addr: addr})
		return err
	})
}
