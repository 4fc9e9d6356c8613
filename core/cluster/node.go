package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// Config says who this broker is and how the controller behaves. NodeID
// is required; zero values pick Kafka's defaults.
type Config struct {
	NodeID int32
	// Host and Port are the inter-broker listener's advertised address
	// (replica fetchers dial it); Endpoints every advertised listener.
	Host      string
	Port      int32
	Endpoints []Endpoint
	Rack      string // broker.rack

	// SessionTTL is broker.session.timeout.ms: how long a silent broker
	// keeps its registration and leaderships (default 9s, Kafka's).
	// Keep-alives go every third of it.
	SessionTTL time.Duration

	// AutoLeaderRebalance is auto.leader.rebalance.enable; the check
	// runs every LeaderImbalanceCheckInterval (default 300s) and moves
	// leaderships back to preferred replicas of brokers whose share of
	// non-preferred leaders exceeds LeaderImbalancePerBrokerPercentage
	// (default 10).
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int

	// UncleanLeaderElection is the broker default of the topic key
	// unclean.leader.election.enable.
	UncleanLeaderElection bool

	// DefaultReplicationFactor and DefaultPartitions stand in for -1 in
	// CreateTopic (default.replication.factor, num.partitions; default 1).
	DefaultReplicationFactor int16
	DefaultPartitions        int32

	// NoDeadBrokerProbe turns off ending a dead broker's session early
	// (see doc.go): brokers are then declared dead by the session
	// timeout alone, as in Kafka. Host:Port must be a listener this
	// broker binds before Start and keeps until Close unless it is set.
	NoDeadBrokerProbe bool

	// AskPeers, if set, asks each of peers (the other registered
	// brokers) whether it reaches the metadata store now, within ctx, and
	// returns their answers by ID (a missing one counts as unreachable).
	// A broker whose keep-alives fail asks before its lease lapses: if
	// every peer answered and none reaches the store, it keeps leading
	// through the whole-store outage instead of fencing itself (see
	// doc.go, "When the whole store is down"). nil: it always fences.
	AskPeers func(ctx context.Context, peers []BrokerInfo) map[int32]PeerAnswer

	// ShutdownTimeout bounds ShutDown's wait for leaderships to move
	// (default 30s).
	ShutdownTimeout time.Duration

	// Logger receives registration, election and fencing reports; nil
	// means slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.SessionTTL <= 0 {
		c.SessionTTL = 9 * time.Second
	}
	if c.LeaderImbalanceCheckInterval <= 0 {
		c.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if c.LeaderImbalancePerBrokerPercentage <= 0 {
		c.LeaderImbalancePerBrokerPercentage = 10
	}
	if c.DefaultReplicationFactor <= 0 {
		c.DefaultReplicationFactor = 1
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Applier is implemented by the broker: it turns store state into
// partition roles. Calls are never concurrent, come in store revision
// order, and must not block for long; they may call Node methods (not
// Close or ShutDown).
type Applier interface {
	// ApplyPartition gives a partition's current state and replica list:
	// the broker leads if st.Leader is its ID, follows st.Leader if it is
	// in assignment, and drops the replica if it is not. Called on every
	// change of either; idempotent.
	ApplyPartition(topic string, p int32, st PartitionState, assignment []int32)
	// ApplyBrokers gives the live brokers, sorted by ID, on every change.
	ApplyBrokers(live []BrokerInfo)
	// ApplyTopicDeleted says the topic is gone (or replaced by a new
	// topic of the same name, whose partitions follow).
	ApplyTopicDeleted(topic string)
}

// TopicApplier is optionally implemented by an Applier. ApplyTopic gives
// a topic's record (/topics/<name>) whenever it was written: created,
// configs altered (AlterTopicConfigs), partitions added, replicas
// reassigned. It comes before the ApplyPartition calls of the same
// revision, so a broker can resolve the topic's configs (retention,
// segment size, min.insync.replicas, cleanup.policy) on every replica,
// not only on the broker that took the AlterConfigs request. Calls are
// serialized with the Applier's; t.Version only grows for one topic ID.
type TopicApplier interface {
	ApplyTopic(t Topic)
}

// FenceApplier is optionally implemented by an Applier. ApplyFenced(true)
// says the broker's lease lapsed (no successful keep-alive for the
// session timeout minus a margin) or its session is gone: the controller
// may move, or has moved, its leaderships away, so it must stop acting as
// a leader (answer NOT_LEADER_OR_FOLLOWER) until ApplyFenced(false), which
// comes once a keep-alive succeeds again (or it registered again) and its
// view is current. While fenced (a lapsed lease or an ended session), the
// Node makes no ApplyPartition call that names this broker leader (others
// still come, so it follows new leaders); when that ends it makes one for
// every partition of the current view. Calls are serialized with the
// Applier's.
type FenceApplier interface {
	ApplyFenced(fenced bool)
}

// Node is one broker's membership in the cluster: its registration, its
// view of the cluster keys, and its candidacy as controller.
//
// Goroutines (each started by Start, stopped and waited for by Close):
// the session keeper (keepSession), the watcher (watchLoop, with one
// pump per watch stream), and the controller loop (runController).
type Node struct {
	// elections counts the leader elections this node made as controller
	// (monitoring: Elections).
	elections struct{ clean, unclean atomic.Int64 }

	cfg         Config
	store       sdk.MetadataStore
	apply       Applier
	log         *slog.Logger
	incarnation string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	applyMu sync.Mutex // serializes Applier calls

	mu            sync.Mutex
	view          *view         // REQUIRES mu to swap; a published view is never modified
	changed       chan struct{} // closed and replaced on every change; REQUIRES mu
	session       sdk.SessionID // current session; 0 while unregistered
	leaseFrom     time.Time     // when the last successful grant or keep-alive of session was sent
	lastKeepAlive time.Time     // when the last successful grant or keep-alive returned
	lastFailure   time.Time     // when the last failed keep-alive returned
	fenced        bool
	withhold      bool  // the lease lapsed: withhold leaderships (see setWithhold)
	outage        bool  // the lease lapsed but no peer reaches the store: lead on (outage.go)
	shutdown      bool  // ShutDown or Close began: do not register again
	controllerVer int64 // version of /controller while this Node is controller, else 0

	kick      chan struct{} // CheckSession: renew (or find the session gone) now
	suspicion int64         // version of an unanswered /suspects/<self> for the current session, else 0

	suspected chan struct{} // wakes answerSuspicions; buffered 1
}

// Start registers the broker, loads the cluster state (calling the
// Applier for every partition before it returns), and starts the session
// keeper, the watcher and the controller candidacy. It waits, logging,
// while the store is unavailable (no quorum yet) or while an earlier
// incarnation of this broker is still registered, until ctx ends.
func Start(ctx context.Context, store sdk.MetadataStore, cfg Config, apply Applier) (*Node, error) {
	cfg.setDefaults()
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("cluster: node id %d is negative", cfg.NodeID)
	}
	var inc [8]byte
	rand.Read(inc[:])
	n := &Node{
		cfg:         cfg,
		store:       store,
		apply:       apply,
		log:         cfg.Logger.With("node", cfg.NodeID),
		incarnation: hex.EncodeToString(inc[:]),
		view:        newView(),
		changed:     make(chan struct{}),
		kick:        make(chan struct{}, 1),
		suspected:   make(chan struct{}, 1),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.register(ctx); err != nil {
		n.cancel()
		return nil, err
	}
	var listed []int64
	err := n.retry(ctx, "load the cluster state", func() (err error) {
		listed, err = n.resync(ctx)
		return err
	})
	if err != nil {
		n.revoke()
		n.cancel()
		return nil, err
	}
	n.wg.Add(4)
	go n.keepSession(n.ctx)
	go n.watchLoop(n.ctx, listed)
	go n.runController(n.ctx)
	go n.answerSuspicions(n.ctx)
	if !cfg.NoDeadBrokerProbe {
		n.wg.Add(1)
		go n.watchPeers(n.ctx)
	}
	return n, nil
}

// Close leaves the cluster without a controlled shutdown: it stops every
// goroutine, waits for them, and revokes the session so the broker's
// registration (and its controllership) end now rather than after the
// TTL.
func (n *Node) Close() error {
	n.mu.Lock()
	n.shutdown = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	n.revoke()
	return nil
}

// retry runs fn until it succeeds, fails with a non-retryable error, or
// ctx ends, logging while the store is unavailable.
func (n *Node) retry(ctx context.Context, what string, fn func() error) error {
	b := newBackoff()
	lastLog := time.Time{}
	for {
		err := fn()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if time.Since(lastLog) > 5*time.Second {
			n.log.Warn("cluster: waiting for the metadata store to "+what, "err", err)
			lastLog = time.Now()
		}
		if !b.wait(ctx) {
			return fmt.Errorf("cluster: %s: %w", what, ctx.Err())
		}
	}
}

// register grants a session and creates /brokers/<id> with it. A
// registration of another incarnation blocks until it ends (its process
// died and its session must expire first), as Kafka refuses a duplicate
// broker registration.
func (n *Node) register(ctx context.Context) error {
	info := BrokerInfo{ID: n.cfg.NodeID, Host: n.cfg.Host, Port: n.cfg.Port, Endpoints: n.cfg.Endpoints, Rack: n.cfg.Rack, Incarnation: n.incarnation}
	raw, _ := json.Marshal(info)
	lastLog := time.Time{}
	b := newBackoff()
	fail := func(err error) error { return fmt.Errorf("cluster: register broker %d: %w", n.cfg.NodeID, err) }
	for {
		expect := sdk.MustNotExist
		cur, err := n.store.Get(ctx, &sdk.GetRequest{Key: brokerKey(n.cfg.NodeID)})
		switch {
		case err == nil:
			prev, _ := decodeBroker(cur.Value)
			if prev.Incarnation != n.incarnation {
				if time.Since(lastLog) > 5*time.Second {
					n.log.Warn("cluster: broker ID is registered by another incarnation; waiting for its session to end",
						"incarnation", prev.Incarnation)
					lastLog = time.Now()
				}
				if !b.wait(ctx) {
					return fail(ctx.Err())
				}
				continue
			}
			expect = cur.Version
		case errors.Is(err, sdk.ErrNotFound):
		case retryable(err):
			if !b.wait(ctx) {
				return fail(ctx.Err())
			}
			continue
		default:
			return fail(err)
		}
		// The session is granted only now, so it can not expire while
		// waiting above.
		var (
			sess *sdk.GrantSessionResponse
			sent time.Time // the lease runs from before the grant reached the store
		)
		err = n.retry(ctx, "grant a session", func() (err error) {
			sent = time.Now()
			sess, err = n.store.GrantSession(ctx, &sdk.GrantSessionRequest{TTL: n.cfg.SessionTTL})
			return err
		})
		if err != nil {
			return fail(err)
		}
		_, err = n.store.Put(ctx, &sdk.PutRequest{Key: brokerKey(n.cfg.NodeID), Value: raw, ExpectVersion: expect, Session: sess.ID})
		switch {
		case err == nil:
			n.mu.Lock()
			n.session = sess.ID
			n.leaseFrom, n.lastKeepAlive = sent, time.Now()
			n.signalLocked()
			n.mu.Unlock()
			n.log.Info("cluster: broker registered", "session", sess.ID, "ttl", sess.TTL)
			return nil
		case errors.Is(err, sdk.ErrVersionMismatch) || errors.Is(err, sdk.ErrSessionExpired) || retryable(err):
			n.store.RevokeSession(ctx, &sdk.RevokeSessionRequest{ID: sess.ID}) // best effort
			if !b.wait(ctx) {
				return fail(ctx.Err())
			}
		default:
			n.store.RevokeSession(ctx, &sdk.RevokeSessionRequest{ID: sess.ID})
			return fail(err)
		}
	}
}

// setFenced tells the FenceApplier.
func (n *Node) setFenced(f bool) {
	n.mu.Lock()
	was := n.fenced
	n.fenced = f
	n.mu.Unlock()
	if was == f {
		return
	}
	if fa, ok := n.apply.(FenceApplier); ok {
		n.applyMu.Lock()
		fa.ApplyFenced(f)
		n.applyMu.Unlock()
	}
}

// setWithhold starts or ends withholding: while the lease has lapsed
// (the session may still live in the store, but the controller may give
// this broker's leaderships away at any moment), deliver makes no
// ApplyPartition call that names this broker leader, so a view change
// can not make a fenced broker lead. Ending it re-applies every
// partition of the current view, so nothing withheld is lost.
func (n *Node) setWithhold(w bool) {
	n.mu.Lock()
	was := n.withhold
	n.withhold = w
	n.mu.Unlock()
	if was == w || w || n.apply == nil {
		return
	}
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	v := n.snapshot()
	tps := make([]TopicPartition, 0, len(v.parts))
	for tp := range v.parts {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, comparePartitions)
	n.applyPartitionsLocked(v, tps)
}

// revoke ends the session, deleting the registration and any
// controllership now (best effort: the TTL ends them anyway).
func (n *Node) revoke() {
	n.mu.Lock()
	sess := n.session
	n.session = 0
	n.mu.Unlock()
	if sess == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.store.RevokeSession(ctx, &sdk.RevokeSessionRequest{ID: sess}); err != nil &&
		!errors.Is(err, sdk.ErrSessionExpired) {
		n.log.Warn("cluster: revoke session", "err", err)
	}
}

// signalLocked wakes every waitView. REQUIRES n.mu.
func (n *Node) signalLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// waitView blocks until cond holds for the current view or ctx ends.
func (n *Node) waitView(ctx context.Context, cond func(*view) bool) bool {
	for {
		n.mu.Lock()
		v, ch := n.view, n.changed
		n.mu.Unlock()
		if cond(v) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (n *Node) snapshot() *view {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view
}

// Brokers returns the live brokers, sorted by ID.
func (n *Node) Brokers() []BrokerInfo { return n.snapshot().liveBrokers() }

// ControllerID returns the current controller's broker ID, or -1.
func (n *Node) ControllerID() int32 {
	v := n.snapshot()
	if v.controller.version == 0 {
		return -1
	}
	return v.controller.id
}

// IsController reports whether this Node is the controller now.
func (n *Node) IsController() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.controllerVer != 0 && n.view.controller.version == n.controllerVer
}

// Elections returns how many clean and unclean leader elections this node
// made while it was the controller.
func (n *Node) Elections() (clean, unclean int64) {
	return n.elections.clean.Load(), n.elections.unclean.Load()
}

// SessionLive reports whether the node holds a metadata-store session (it
// registered and the session has not ended), for monitoring.
func (n *Node) SessionLive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.session != 0
}

// Fenced reports whether the broker's session is gone (see FenceApplier).
func (n *Node) Fenced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fenced
}

// Topic returns a topic as last seen.
func (n *Node) Topic(name string) (Topic, bool) {
	t, ok := n.snapshot().topics[name]
	return t, ok
}

// Topics returns every topic as last seen, sorted by name.
func (n *Node) Topics() []Topic {
	v := n.snapshot()
	out := make([]Topic, 0, len(v.topics))
	for _, t := range v.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Topic) int {
		if a.Name < b.Name {
			return -1
		} else if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Partition returns a partition's state and replicas as last seen.
func (n *Node) Partition(topic string, p int32) (PartitionState, []int32, bool) {
	v := n.snapshot()
	st, ok := v.parts[TopicPartition{topic, p}]
	t, tok := v.topics[topic]
	if !ok || !tok {
		return PartitionState{}, nil, false
	}
	return st.Clone(), slices.Clone(t.Assignment(p)), true
}

// Revision returns the store revision the Node's view reflects.
func (n *Node) Revision() int64 { return n.snapshot().rev }
