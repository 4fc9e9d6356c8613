package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/core/cluster"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/replica"
	"github.com/vltava/vltava/plugins/sdk"
)

// Every broker is a member of a cluster through core/cluster (issue 9:
// a single node is a cluster of one): it registers, campaigns for the
// controller role, and the cluster's watcher tells it, partition by
// partition, whether it leads, follows or does neither (clusterApplier).
// Without controller.quorum.voters the cluster is this broker alone over
// the embedded local store, a combined broker and controller like
// KRaft's single-node mode; it runs the same code as a three-broker
// cluster.

// clusterState is the broker's cluster machinery, set by startCluster
// before the listener serves.
type clusterState struct {
	node     *cluster.Node
	fetchers *replica.Fetchers
	peers    *peerAsker  // asks peers whether they reach the store (63_broker_heartbeat.go)
	fenced   atomic.Bool // as the last ApplyFenced said (read by applyPartition, which node may not be set for yet)
	cancel   context.CancelFunc
	live     atomic.Pointer[[]cluster.BrokerInfo]
}

// waitForStore blocks until the metadata store answers, logging while it
// does not (a raft quorum forms only once a majority of voters is up).
func (b *Broker) waitForStore() error {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, err := b.store.Get(ctx, &sdk.GetRequest{Key: "/controller"})
		cancel()
		if err == nil || errors.Is(err, sdk.ErrNotFound) {
			if attempt > 0 {
				b.logger.Info("broker: metadata quorum is available")
			}
			return nil
		}
		if !errors.Is(err, sdk.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("broker: metadata store: %w", err)
		}
		b.logger.Warn("broker: waiting for the metadata quorum (a majority of controller.quorum.voters must be up)",
			"voters", b.cfg.ControllerQuorumVoters, "err", err)
		select {
		case <-b.stopCh:
			return errors.New("broker: stopped while waiting for the metadata quorum")
		case <-time.After(time.Second):
		}
	}
}

// alone reports whether no other broker can join this broker's cluster:
// it runs over its own embedded store, or over a store handed in without
// controller.quorum.voters and without Options.Cluster (which a store
// shared with other brokers, ZooKeeper or etcd, sets).
func (b *Broker) alone() bool {
	return b.ownsStore || (b.cfg.ControllerQuorumVoters == "" && !b.opts.Cluster)
}

// startCluster registers the broker and starts the watcher, fetchers and
// the ISR checks. The listener must be bound (its address is registered).
func (b *Broker) startCluster() error {
	ibTLS, ibSASL, err := b.interBrokerSecurity()
	if err != nil {
		if !b.alone() {
			return err
		}
		// A cluster of one: no other broker ever registers, its
		// fetchers never dial, and a single SASL broker needs no
		// inter-broker credentials (as before every broker ran
		// core/cluster).
		ibTLS, ibSASL = nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cs := &clusterState{cancel: cancel, peers: &peerAsker{b: b}}
	cs.live.Store(&[]cluster.BrokerInfo{})
	cs.fetchers = replica.NewFetchers(replica.Config{
		ReplicaID:         b.cfg.NodeID,
		BrokerEpoch:       -1,
		MaxWait:           time.Duration(b.cfg.ReplicaFetchWaitMaxMs) * time.Millisecond,
		PartitionMaxBytes: b.cfg.ReplicaFetchMaxBytes,
		Backoff:           200 * time.Millisecond,
		Dial: replica.WireDialer(replica.ConnConfig{
			ClientID: fmt.Sprintf("vltava-replica-%d", b.cfg.NodeID), TLS: ibTLS, SASL: ibSASL,
		}),
		Logger: b.logger,
	})
	b.cl = cs
	host, port := b.advertised()
	var askPeers func(context.Context, []cluster.BrokerInfo) map[int32]cluster.PeerAnswer
	if !b.alone() {
		askPeers = cs.peers.ask
	}
	node, err := cluster.Start(ctx, b.store, cluster.Config{
		NodeID:                   b.cfg.NodeID,
		Host:                     host,
		Port:                     port,
		Endpoints:                b.endpoints(),
		Rack:                     b.cfg.BrokerRack,
		SessionTTL:               time.Duration(b.cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		AutoLeaderRebalance:      b.cfg.AutoLeaderRebalanceEnable,
		UncleanLeaderElection:    b.cfg.UncleanLeaderElectionEnable,
		DefaultReplicationFactor: b.cfg.DefaultReplicationFactor,
		DefaultPartitions:        b.cfg.NumPartitions,
		AskPeers:                 askPeers,
		Logger:                   b.logger,
	}, clusterApplier{b})
	if err != nil {
		cancel()
		cs.fetchers.Close()
		b.cl = nil
		return fmt.Errorf("broker: join cluster: %w", err)
	}
	cs.node = node
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.isrLoop(ctx)
	}()
	return nil
}

// stopCluster hands leadership away (controlled shutdown, bounded), then
// stops the node and the fetchers.
func (b *Broker) stopCluster() error {
	cs := b.cl
	if cs == nil {
		return nil
	}
	var errs []error
	if cs.node != nil && b.cfg.ControlledShutdownEnable {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := cs.node.ShutDown(ctx); err != nil {
			b.logger.Warn("broker: controlled shutdown incomplete", "err", err)
		}
		cancel()
	}
	cs.cancel()
	if cs.node != nil {
		errs = append(errs, cs.node.Close())
	}
	cs.fetchers.Close()
	cs.peers.close()
	return errors.Join(errs...)
}

// liveBrokers lists the registered brokers.
func (b *Broker) liveBrokers() []cluster.BrokerInfo { return *b.cl.live.Load() }

// brokerInfo finds a live broker by ID.
func (b *Broker) brokerInfo(id int32) (cluster.BrokerInfo, bool) {
	for _, bi := range b.liveBrokers() {
		if bi.ID == id {
			return bi, true
		}
	}
	return cluster.BrokerInfo{}, false
}

// controllerID is the current controller's node ID (-1 if none).
func (b *Broker) controllerID() int32 {
	if b.cl.node == nil {
		return -1 // still joining
	}
	return b.cl.node.ControllerID()
}

// storeUnreachable refuses a metadata change while this broker's lease on
// the metadata store has lapsed (a whole-store outage it leads through, or
// fenced): REQUEST_TIMED_OUT, retriable, which a Kafka broker answers when
// it cannot reach its controller, with a message that says why, at once
// rather than after the store's request timeout.
func (b *Broker) storeUnreachable() (errorCode, string, bool) {
	n := b.cl.node
	if n == nil || !n.StoreUnreachable() {
		return 0, "", false
	}
	msg := "the metadata store is unreachable: metadata changes are refused until it answers again; retry"
	if !n.StoreOutage() {
		msg = "this broker cannot reach the metadata store (it is fenced until it can); retry, or ask another broker"
	}
	return kerr.RequestTimedOut.Code, msg, true
}

// registered reports whether this broker is registered and not fenced,
// as its view of the cluster shows.
func (b *Broker) registered() bool {
	n := b.cl.node
	if n == nil || n.Fenced() {
		return false
	}
	return slices.ContainsFunc(n.Brokers(), func(bi cluster.BrokerInfo) bool { return bi.ID == b.cfg.NodeID })
}

// clusterApplier turns the cluster watcher's calls into role changes.
type clusterApplier struct{ b *Broker }

var (
	_ cluster.Applier      = clusterApplier{}
	_ cluster.FenceApplier = clusterApplier{}
)

// ApplyPartition implements cluster.Applier.
func (a clusterApplier) ApplyPartition(topic string, p int32, st cluster.PartitionState, assignment []int32) {
	a.b.applyPartition(topic, p, st, assignment)
}

// ApplyBrokers implements cluster.Applier.
func (a clusterApplier) ApplyBrokers(live []cluster.BrokerInfo) {
	b := a.b
	l := slices.Clone(live)
	b.cl.live.Store(&l)
	if n := b.cl.node; n != nil && !n.Fenced() && !slices.ContainsFunc(l, func(bi cluster.BrokerInfo) bool { return bi.ID == b.cfg.NodeID }) {
		// Our own registration is gone (a store restart lost the
		// sessions): find out now, not at the next keep-alive.
		n.CheckSession()
	}
	// Followers whose leader just (re)appeared, or moved, fetch from it.
	for _, p := range b.meta.Load().allPartitions() {
		p.LockTransitions()
		if st := p.State(); st.Role == part.Follower {
			b.followLocked(p, st.View.Leader)
		}
		p.UnlockTransitions()
	}
}

// ApplyFenced implements cluster.FenceApplier: a fenced broker (its
// session lapsed) stops leading at once; once registered again it
// re-applies every partition's current state.
func (a clusterApplier) ApplyFenced(fenced bool) {
	b := a.b
	b.cl.fenced.Store(fenced)
	if fenced {
		b.logger.Warn("broker: fenced (session lost): no longer leading any partition")
		for _, p := range b.meta.Load().allPartitions() {
			p.LockTransitions()
			p.FenceLocked()
			p.UnlockTransitions()
		}
		b.groups.kick()
		return
	}
	b.logger.Info("broker: unfenced: re-applying partition states")
	if b.cl.node == nil {
		return
	}
	for _, t := range b.cl.node.Topics() {
		for i := range t.Partitions {
			if st, assignment, ok := b.cl.node.Partition(t.Name, i); ok {
				b.applyPartition(t.Name, i, st, assignment)
			}
		}
	}
}

// ApplyTopicDeleted implements cluster.Applier.
func (a clusterApplier) ApplyTopicDeleted(topic string) {
	b := a.b
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := b.topic(topic)
	if t == nil {
		return
	}
	for _, p := range t.partitions {
		p.LockTransitions()
		b.cl.fetchers.Unfollow(p.Partition)
		p.followAddr = ""
		p.BecomeNoneLocked(part.View{Leader: -1})
		p.UnlockTransitions()
	}
	b.meta.Store(b.meta.Load().without(topic))
	for _, p := range t.partitions {
		if err := p.log.Delete(); err != nil {
			b.logger.Error("broker: delete partition", "partition", p.String(), "err", err)
		}
	}
	b.logger.Info("broker: deleted topic", "topic", topic)
}

// applyPartition makes this broker leader, follower or neither of one
// partition, as the controller published. Idempotent.
func (b *Broker) applyPartition(topic string, index int32, st cluster.PartitionState, assignment []int32) {
	p := b.clusterPartition(topic, index)
	if p == nil {
		b.logger.Warn("broker: partition state for a topic this broker cannot open", "topic", topic, "partition", index)
		return
	}
	v := part.View{Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch,
		Replicas: slices.Clone(assignment), ISR: slices.Clone(st.ISR), Version: st.Version}
	me := b.cfg.NodeID
	if topic == offsetsTopic {
		defer b.groups.kick() // the group coordinator follows (groups_load.go)
	}
	if topic == txnStateTopic {
		defer b.txns.kick() // the transaction coordinator loads what it leads (txns.go)
	}
	p.LockTransitions()
	defer p.UnlockTransitions()
	if p.Stale(v) {
		return // older than what we hold (our own ISR commit got here first)
	}
	switch {
	case st.Leader == me && b.cl.fenced.Load():
		// core/cluster gives a fenced broker no leadership; should a
		// state naming it leader come anyway, it stays unled until
		// ApplyFenced(false) re-applies the current view.
		b.logger.Warn("broker: fenced: not leading", "partition", p.String(), "leader_epoch", st.LeaderEpoch)
	case st.Leader == me:
		// The fetcher must be gone before the partition leads: Unfollow
		// waits for a follower call in progress.
		b.cl.fetchers.Unfollow(p.Partition)
		p.followAddr = ""
		became, err := p.BecomeLeaderLocked(me, v, time.Now())
		if err != nil {
			b.logger.Error("broker: become leader", "partition", p.String(), "err", err)
			return
		}
		if !became {
			return
		}
		b.logger.Info("broker: leading", "partition", p.String(), "leader_epoch", st.LeaderEpoch, "isr", st.ISR, "leo", p.log.EndOffset(), "hw", p.HighWatermark())
	case st.Leader >= 0 && slices.Contains(assignment, me):
		changed, err := p.BecomeFollowerLocked(v)
		if err != nil {
			b.logger.Error("broker: become follower", "partition", p.String(), "err", err)
			return
		}
		if changed {
			b.cl.fetchers.Unfollow(p.Partition)
			p.followAddr = ""
			b.logger.Info("broker: following", "partition", p.String(), "leader", st.Leader, "leader_epoch", st.LeaderEpoch)
		}
		b.followLocked(p, st.Leader)
	default:
		b.cl.fetchers.Unfollow(p.Partition)
		p.followAddr = ""
		if p.BecomeNoneLocked(v) {
			b.logger.Info("broker: not a replica or partition offline", "partition", p.String(), "leader", st.Leader)
		}
	}
}

// followLocked points the fetchers at leader's current address, if known
// and changed. The partition's transition lock must be held.
func (b *Broker) followLocked(p *partition, leader int32) {
	bi, ok := b.brokerInfo(leader)
	if !ok {
		return // ApplyBrokers follows once the leader registers
	}
	addr := net.JoinHostPort(bi.Host, strconv.Itoa(int(bi.Port)))
	if p.followAddr == addr {
		return
	}
	if p.followAddr != "" {
		b.cl.fetchers.Unfollow(p.Partition)
	}
	p.followAddr = addr
	b.cl.fetchers.Follow(p.Partition, replica.BrokerAddr{ID: leader, Addr: addr})
}

// clusterPartition returns the partition, reading its topic from the
// store first if this broker does not know it (or its partition) yet.
func (b *Broker) clusterPartition(topic string, index int32) *partition {
	if t := b.topic(topic); t != nil && t.partition(index) != nil {
		return t.partition(index)
	}
	if err := b.refreshTopic(context.Background(), topic); err != nil {
		b.logger.Warn("broker: read topic", "topic", topic, "err", err)
		return nil
	}
	if t := b.topic(topic); t != nil {
		return t.partition(index)
	}
	return nil
}

// refreshTopic reads /topics/<name> and opens or updates the topic.
func (b *Broker) refreshTopic(ctx context.Context, name string) error {
	resp, err := b.store.Get(ctx, &sdk.GetRequest{Key: topicsPrefix + name})
	if err != nil {
		return err
	}
	var rec cluster.TopicRecord
	if err := json.Unmarshal(resp.Value, &rec); err != nil {
		return fmt.Errorf("broker: topic %s: %w", name, err)
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	prev := b.topic(name)
	if prev != nil && prev.version >= resp.Version {
		return nil
	}
	t, err := b.openTopic(name, rec, resp.Version, prev)
	if err != nil {
		return err
	}
	if prev != nil {
		for _, p := range t.partitions {
			p.setConfig(t.cfg)
		}
	}
	b.meta.Store(b.meta.Load().with(t))
	return nil
}

// createClusterTopicLocked creates a topic through the cluster (the
// controller's placement, or assignment), then opens it here; the other
// brokers open it when its partition states reach them. metaMu is held.
func (b *Broker) createClusterTopicLocked(ctx context.Context, name string, partitions int32, rf int16, assignment [][]int32, configs map[string]string, validateOnly bool) (*topic, errorCode, string) {
	if code, msg, ok := b.storeUnreachable(); ok {
		return nil, code, msg
	}
	if !b.registered() {
		// The store lost this broker's session (a store restart, a long
		// pause): until it has registered again it counts no live broker,
		// itself included, so placement would wrongly find too few.
		return nil, kerr.RequestTimedOut.Code, "this broker is registering with the metadata store again; retry"
	}
	if assignment != nil {
		partitions, rf = -1, -1 // the assignment says both
	}
	if validateOnly {
		plan, err := b.cl.node.PlanTopic(ctx, partitions, rf, assignment)
		if err != nil {
			return nil, clusterErrorCode(err), err.Error()
		}
		return &topic{name: name, overrides: configs, partitions: make([]*partition, len(plan)), replicas: plan}, 0, ""
	}
	ct, err := b.cl.node.CreateTopic(ctx, name, partitions, rf, assignment, configs)
	if err != nil {
		if errors.Is(err, kerr.InvalidReplicationFactor) || errors.Is(err, kerr.InvalidReplicaAssignment) {
			if ok, rerr := b.cl.node.Registered(ctx); rerr != nil || !ok {
				// Too few brokers because the store does not count this
				// one right now (see registered): retriable.
				return nil, kerr.RequestTimedOut.Code, "this broker is registering with the metadata store again; retry"
			}
		}
		return nil, clusterErrorCode(err), err.Error()
	}
	rec := cluster.TopicRecord{ID: ct.ID, Partitions: ct.Partitions, Configs: ct.Configs, Replicas: ct.Replicas}
	if prev := b.topic(name); prev != nil {
		return prev, 0, "" // the watcher opened it first
	}
	t, err := b.openTopic(name, rec, ct.Version, nil)
	if err != nil {
		b.logger.Error("broker: create topic", "topic", name, "err", err)
		return nil, errKafkaStorage, err.Error()
	}
	b.meta.Store(b.meta.Load().with(t))
	b.logger.Info("broker: created topic", "topic", name, "partitions", ct.Partitions, "replicas", ct.Replicas)
	return t, 0, ""
}

// clusterErrorCode maps a core/cluster error (which wraps a kerr code
// where one applies) to the code for the client.
func clusterErrorCode(err error) errorCode {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return storeErrorCode(err)
}
