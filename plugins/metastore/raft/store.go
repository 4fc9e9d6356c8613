package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/vltava/vltava/plugins/sdk"
)

// errRetry marks an attempt that reached no leader and applied nothing;
// onLeader tries again.
var errRetry = errors.New("raft: not the leader")

// applyEnqueueTimeout bounds the wait to hand an entry to raft.
const applyEnqueueTimeout = 5 * time.Second

// Store is a sdk.MetadataStore replicated among the voters with Raft.
// Any voter's Store serves every method: writes and linearizable reads
// go to the leader (locally or forwarded); watches are served from the
// node's own applied log.
type Store struct {
	cfg  Config
	log  *slog.Logger
	id   hraft.ServerID
	addr hraft.ServerAddress

	fsm       *fsm
	raft      *hraft.Raft
	trans     *hraft.NetworkTransport
	mux       *mux
	logStore  *raftboltdb.BoltStore
	httpSrv   *http.Server
	fwdClient *http.Client
	sessions  sessionTable

	readyTerm atomic.Uint64 // term in which this leader's barrier succeeded

	ctx    context.Context // ends when Close starts
	cancel context.CancelFunc

	// callMu guards closed and the start of calls: a call enters only
	// while the store is open, and Close waits for the calls in flight.
	callMu sync.RWMutex
	closed bool
	calls  sync.WaitGroup

	wg        sync.WaitGroup // the monitor and the forwarding server
	closeOnce sync.Once
}

var (
	_ sdk.MetadataStore = (*Store)(nil)
	_ sdk.Compactor     = (*Store)(nil)
)

// Open starts this voter: it opens (or creates) the raft log and
// snapshots in cfg.DataDir, listens on the quorum address, and, if the
// node has no raft state yet, bootstraps the cluster with cfg.Voters.
// Open does not wait for a quorum; until a leader is elected requests
// wait (up to LeaderWait) and the node says so in its log. WaitLeader
// waits explicitly.
func Open(cfg Config) (*Store, error) {
	if err := cfg.check(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	cfg.setDefaults()
	s := &Store{
		cfg:       cfg,
		log:       cfg.Logger.With("node", cfg.NodeID),
		id:        serverID(cfg.NodeID),
		addr:      hraft.ServerAddress(cfg.Voters[cfg.NodeID]),
		fwdClient: newForwardClient(dialer{dial: cfg.Dial, tls: cfg.ClientTLS}, cfg.LeaderWait),
	}
	s.fsm = newFSM(s.log, cfg.WatchHistory, cfg.WatchBuffer)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.start(); err != nil {
		s.cancel()
		s.teardown()
		return nil, err
	}
	s.wg.Add(1)
	go s.monitor()
	if cfg.NonVoter {
		s.wg.Add(1)
		go s.joinLoop()
	}
	return s, nil
}

func serverID(id int32) hraft.ServerID { return hraft.ServerID(strconv.Itoa(int(id))) }

// start opens the stores, the listener and raft; teardown undoes
// whatever part of it succeeded.
func (s *Store) start() error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	var err error
	if s.logStore, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.DataDir, "raft.db")}); err != nil {
		return fmt.Errorf("raft: open log store: %w", err)
	}
	hlog := newHCLogger(s.log)
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hlog) // in DataDir/snapshots
	if err != nil {
		return fmt.Errorf("raft: open snapshot store: %w", err)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.QuorumAddr); err != nil {
			return fmt.Errorf("raft: quorum listener: %w", err)
		}
	}
	if cfg.NonVoter {
		s.addr = hraft.ServerAddress(ln.Addr().String()) // the port really bound
	}
	advertise, err := net.ResolveTCPAddr("tcp", string(s.addr))
	if err != nil {
		ln.Close()
		return fmt.Errorf("raft: advertise address %s: %w", s.addr, err)
	}
	s.mux = newMux(ln, advertise, s.log, cfg.ServerTLS)
	s.trans = hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream: raftStream{s.mux.raftL, dialer{dial: cfg.Dial, tls: cfg.ClientTLS}}, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
	})
	s.httpSrv = &http.Server{Handler: http.HandlerFunc(s.serveForward), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.httpSrv.Serve(s.mux.fwdL)
	}()

	rc := s.raftConfig(hlog)
	has, err := hraft.HasExistingState(s.logStore, s.logStore, snaps)
	if err != nil {
		return fmt.Errorf("raft: inspect state: %w", err)
	}
	if s.raft, err = hraft.NewRaft(rc, s.fsm, s.logStore, s.logStore, snaps, s.trans); err != nil {
		return fmt.Errorf("raft: start: %w", err)
	}
	if !has && cfg.NonVoter {
		s.log.Info("raft: no state in data dir; joining the quorum as a non-voter", "voters", FormatVoters(cfg.Voters), "address", string(s.addr), "dir", cfg.DataDir)
	}
	if !has && cfg.Join && !cfg.NonVoter {
		s.log.Info("raft: no state in data dir; waiting for the leader to add this node (AddVoter)", "dir", cfg.DataDir)
	}
	if !has && !cfg.Join && !cfg.NonVoter {
		s.log.Info("raft: no state in data dir; bootstrapping the cluster", "voters", FormatVoters(cfg.Voters), "dir", cfg.DataDir)
		if err := s.raft.BootstrapCluster(s.bootstrapConfig()).Error(); err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
			return fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	return nil
}

func (s *Store) raftConfig(hlog hclogLogger) *hraft.Config {
	rc := hraft.DefaultConfig()
	rc.LocalID = s.id
	rc.Logger = hlog
	if s.cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = s.cfg.HeartbeatTimeout
	}
	if s.cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = s.cfg.ElectionTimeout
	}
	if s.cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = s.cfg.LeaderLeaseTimeout
	}
	if s.cfg.CommitTimeout > 0 {
		rc.CommitTimeout = s.cfg.CommitTimeout
	}
	if s.cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	}
	if s.cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = s.cfg.SnapshotInterval
	}
	if s.cfg.TrailingLogs > 0 {
		rc.TrailingLogs = s.cfg.TrailingLogs
	}
	return rc
}

func (s *Store) bootstrapConfig() hraft.Configuration {
	var c hraft.Configuration
	for id, addr := range s.cfg.Voters {
		c.Servers = append(c.Servers, hraft.Server{Suffrage: hraft.Voter, ID: serverID(id), Address: hraft.ServerAddress(addr)})
	}
	return c
}

// Raft returns the underlying hashicorp/raft node, for membership
// changes (AddVoter, RemoveServer; see doc.go) and diagnostics.
func (s *Store) Raft() *hraft.Raft { return s.raft }

// AddVoter adds node id at addr as a voter; call it on the leader
// (elsewhere it fails). The new node must have been opened with Join.
func (s *Store) AddVoter(id int32, addr string, timeout time.Duration) error {
	if err := s.raft.AddVoter(serverID(id), hraft.ServerAddress(addr), 0, timeout).Error(); err != nil {
		return fmt.Errorf("raft: add voter %d at %s: %w", id, addr, err)
	}
	return nil
}

// RemoveVoter removes node id from the voters; call it on the leader.
func (s *Store) RemoveVoter(id int32, timeout time.Duration) error {
	if err := s.raft.RemoveServer(serverID(id), 0, timeout).Error(); err != nil {
		return fmt.Errorf("raft: remove voter %d: %w", id, err)
	}
	return nil
}

// Leader reports the current leader's node ID and quorum address, or
// ok false while no leader is known.
func (s *Store) Leader() (id int32, addr string, ok bool) {
	a, sid := s.raft.LeaderWithID()
	if a == "" {
		return 0, "", false
	}
	n, err := strconv.ParseInt(string(sid), 10, 32)
	if err != nil {
		return 0, string(a), false
	}
	return int32(n), string(a), true
}

// IsLeader reports whether this node is the leader now.
func (s *Store) IsLeader() bool { return s.raft.State() == hraft.Leader }

// WaitLeader waits until a leader is known, ctx ends or the store closes.
func (s *Store) WaitLeader(ctx context.Context) error {
	for {
		if _, _, ok := s.Leader(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return sdk.ErrClosed
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close leaves the quorum: it ends every watch with sdk.ErrClosed, waits
// for calls in flight, stops raft and every goroutine the Store started,
// and closes the files. Later calls return nil.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.callMu.Lock()
		s.closed = true
		s.callMu.Unlock()
		s.cancel()
		s.fsm.closeWatches()
		s.calls.Wait()
		err = s.teardown()
	})
	return err
}

// teardown stops what start started, in reverse order.
func (s *Store) teardown() error {
	var errs []error
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.httpSrv.Shutdown(ctx)
		cancel()
	}
	s.wg.Wait() // the monitor (s.ctx has ended) and the forwarding server
	if s.raft != nil {
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft: shutdown: %w", err))
		}
	}
	if s.trans != nil {
		s.trans.Close()
		s.trans.CloseStreams()
	}
	if s.mux != nil {
		s.mux.close()
	}
	s.fwdClient.CloseIdleConnections()
	if s.logStore != nil {
		if err := s.logStore.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft: close log store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// enter admits a call unless the store is closed; exit ends it.
func (s *Store) enter() bool {
	s.callMu.RLock()
	defer s.callMu.RUnlock()
	if s.closed {
		return false
	}
	s.calls.Add(1)
	return true
}

func (s *Store) exit() { s.calls.Done() }

// onLeader runs local when this node leads and remote (with the leader's
// address) otherwise. It retries while an attempt ends in errRetry (no
// leader, leader unreachable, or the node reached no longer leads:
// nothing was applied), until ctx ends, the store closes or LeaderWait
// passes (sdk.ErrUnavailable).
func (s *Store) onLeader(ctx context.Context, local func() error, remote func(ctx context.Context, addr string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	deadline := time.Now().Add(s.cfg.LeaderWait)
	backoff := 5 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			if s.ctx.Err() != nil {
				return sdk.ErrClosed
			}
			return err
		}
		var err error
		addr, _ := s.raft.LeaderWithID()
		switch {
		case s.raft.State() == hraft.Leader:
			err = local()
		case addr == "":
			err = fmt.Errorf("%w: no leader elected", errRetry)
		default:
			err = remote(ctx, string(addr))
		}
		if !errors.Is(err, errRetry) {
			if err != nil && s.ctx.Err() != nil && !isContractError(err) {
				return sdk.ErrClosed
			}
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: raft: no leader reachable within %v (%v)", sdk.ErrUnavailable, s.cfg.LeaderWait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// isContractError reports errors that are answers, not failures.
func isContractError(err error) bool {
	for _, e := range []error{sdk.ErrNotFound, sdk.ErrVersionMismatch, sdk.ErrSessionExpired, sdk.ErrInvalidArgument} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// localPropose appends c to the log on this (leader) node and returns
// the state machine's answer. Session preconditions that only the leader
// can judge (a deadline passed, an expiry under way) are checked first.
func (s *Store) localPropose(c *command) (applyResult, error) {
	term := s.raft.CurrentTerm()
	if err := s.sessions.precheck(c, term); err != nil {
		return applyResult{}, err
	}
	f := s.raft.Apply(c.encode(), applyEnqueueTimeout)
	if err := f.Error(); err != nil {
		return applyResult{}, s.raftErr(err)
	}
	res, ok := f.Response().(applyResult)
	if !ok {
		return applyResult{}, fmt.Errorf("raft: unexpected apply response %T", f.Response())
	}
	if c.typ == cmdGrant && res.err == nil {
		s.sessions.granted(res.session, c.ttl, term)
	}
	return res, res.err
}

// leaderRead makes this leader's state machine safe to read
// linearizably: a barrier once per term (so every entry committed by
// earlier leaders is applied here), then VerifyLeader (no newer leader
// exists), with the term unchanged across both.
func (s *Store) leaderRead() error {
	term := s.raft.CurrentTerm()
	if err := s.ensureApplied(term); err != nil {
		return err
	}
	if err := s.raft.VerifyLeader().Error(); err != nil {
		return s.readErr(err)
	}
	if s.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: term changed during a read", errRetry)
	}
	return nil
}

// ensureApplied runs a barrier once per leadership term: when it
// succeeds, every entry committed before this leader's term is applied
// to the local state machine.
func (s *Store) ensureApplied(term uint64) error {
	if s.readyTerm.Load() == term {
		return nil
	}
	if err := s.raft.Barrier(applyEnqueueTimeout).Error(); err != nil {
		return s.readErr(err)
	}
	s.readyTerm.Store(term)
	return nil
}

// readErr maps a failed barrier or leadership check: nothing was
// written, so anything but shutdown is worth retrying on the leader.
func (s *Store) readErr(err error) error {
	if errors.Is(err, hraft.ErrRaftShutdown) {
		return s.raftErr(err)
	}
	return fmt.Errorf("%w: %w", errRetry, err)
}

// raftErr maps hashicorp/raft errors onto the contract.
func (s *Store) raftErr(err error) error {
	switch {
	case errors.Is(err, hraft.ErrNotLeader), errors.Is(err, hraft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", errRetry, err) // not appended: safe to retry
	case errors.Is(err, hraft.ErrRaftShutdown):
		if s.ctx.Err() != nil {
			return sdk.ErrClosed
		}
		return fmt.Errorf("%w: raft: %w", sdk.ErrUnavailable, err)
	case errors.Is(err, hraft.ErrLeadershipLost), errors.Is(err, hraft.ErrAbortedByRestore):
		return fmt.Errorf("%w: raft: outcome unknown: %w", sdk.ErrUnavailable, err)
	}
	return fmt.Errorf("raft: %w", err)
}
