package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// runController is the controller candidacy: whenever /controller is
// absent and this broker is registered, campaign; while elected, run the
// controller until deposed.
func (n *Node) runController(ctx context.Context) {
	defer n.wg.Done()
	b := newBackoff()
	for ctx.Err() == nil {
		ok := n.waitView(ctx, func(v *view) bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			return v.controller.version == 0 && n.session != 0 && !n.shutdown
		})
		if !ok {
			return
		}
		term, err := n.campaign(ctx)
		switch {
		case err == nil:
			b.reset()
			n.lead(ctx, term)
		case errors.Is(err, sdk.ErrVersionMismatch):
			// Another broker won; wait for the view to show a newer
			// write (bounded, in case the watch is being re-established).
			wctx, cancel := context.WithTimeout(ctx, n.cfg.SessionTTL)
			n.waitView(wctx, func(v *view) bool { return v.rev > term.seenRev })
			cancel()
		case errors.Is(err, sdk.ErrSessionExpired):
			n.waitView(ctx, func(*view) bool { return n.currentSession() != term.session })
		default:
			if ctx.Err() == nil {
				n.log.Warn("cluster: controller campaign", "err", err)
			}
			b.wait(ctx)
		}
	}
}

func (n *Node) currentSession() sdk.SessionID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.session
}

// term is one controllership.
type term struct {
	epoch   int64
	version int64 // of /controller: the condition of every controller write
	session sdk.SessionID
	seenRev int64
}

// campaign creates /controller (ephemeral, create-only) and bumps
// /controller-epoch in one Txn.
func (n *Node) campaign(ctx context.Context) (term, error) {
	t := term{session: n.currentSession(), seenRev: n.snapshot().rev}
	epochVer, epoch := int64(0), int64(0)
	resp, err := n.store.Get(ctx, &sdk.GetRequest{Key: controllerEpochKey})
	switch {
	case err == nil:
		epochVer = resp.Version
		if err := json.Unmarshal(resp.Value, &epoch); err != nil {
			n.log.Error("cluster: /controller-epoch is not a number; starting over", "value", string(resp.Value))
		}
	case !errors.Is(err, sdk.ErrNotFound):
		return t, err
	}
	t.epoch = epoch + 1
	rec, _ := json.Marshal(controllerRecord{ID: n.cfg.NodeID, Epoch: t.epoch})
	txn, err := n.store.Txn(ctx, &sdk.TxnRequest{
		Conditions: []sdk.Condition{{Key: controllerKey, Version: sdk.MustNotExist}, {Key: controllerEpochKey, Version: epochVer}},
		Ops: []sdk.Op{
			{Type: sdk.OpPut, Key: controllerKey, Value: rec, Session: t.session},
			{Type: sdk.OpPut, Key: controllerEpochKey, Value: []byte(strconv.FormatInt(t.epoch, 10))},
		},
	})
	if err != nil {
		return t, err
	}
	t.version = txn.Revision
	return t, nil
}

// lead runs the controller for one term: it reconciles the store with
// the rules (rules.go) whenever the view changes or the imbalance timer
// fires, and returns when /controller is no longer its own.
func (n *Node) lead(ctx context.Context, t term) {
	n.log.Info("cluster: elected controller", "epoch", t.epoch)
	n.mu.Lock()
	n.controllerVer = t.version
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.controllerVer = 0
		n.mu.Unlock()
		n.log.Info("cluster: no longer controller", "epoch", t.epoch)
	}()
	// Wait until the view shows the term, so "deposed" below is judged
	// on a view that includes our own /controller.
	if !n.waitView(ctx, func(v *view) bool { return v.rev >= t.version }) {
		return
	}
	c := &controller{n: n, term: t, seen: nil}
	tick := time.NewTicker(n.cfg.LeaderImbalanceCheckInterval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	b := newBackoff()
	for {
		n.mu.Lock()
		v, ch := n.view, n.changed
		n.mu.Unlock()
		if v.controller.version != t.version {
			return
		}
		if v.rev >= c.lastWrite && !c.reconcile(ctx, v, false) {
			retry.Reset(b.d)
			b.d = min(2*b.d, 2*time.Second)
		} else {
			b.reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-retry.C:
		case <-tick.C:
			if n.cfg.AutoLeaderRebalance {
				c.reconcile(ctx, n.snapshot(), true)
			}
		}
	}
}

// controller is the state of one term.
type controller struct {
	n    *Node
	term term
	// seen holds the registration revision of each broker as of the last
	// completed pass: a broker whose registration changed since (it went
	// away and came back between two looks) lost its leaderships and ISR
	// places like a dead one.
	seen      map[int32]int64
	lastWrite int64 // revision of the last write; passes wait for the view to reach it
}

// proposal is one partition write the rules asked for.
type proposal struct {
	tp       TopicPartition
	from     PartitionState // Version 0: the key does not exist yet
	to       PartitionState
	topic    *Topic // non-nil when the replica list changes too
	replicas []int32
	kind     electionKind
}

// plan applies the rules to every partition of the view. bounced are
// brokers treated as dead for this pass.
func plan(v *view, bounced map[int32]bool, uncleanDefault bool, selfID int32) []proposal {
	base := v.liveness()
	live := liveness(func(id int32) brokerStatus {
		if bounced[id] {
			return brokerDead
		}
		return base(id)
	})
	var out []proposal
	for _, name := range sortedTopics(v) {
		t := v.topics[name]
		unclean := uncleanDefault
		if s, ok := t.Configs["unclean.leader.election.enable"]; ok {
			unclean = s == "true"
		}
		out = append(out, repairTopic(v, t, live, selfID)...)
		for p := int32(0); p < t.Partitions; p++ {
			tp := TopicPartition{name, p}
			st, ok := v.parts[tp]
			replicas := t.Assignment(p)
			if !ok || replicas == nil {
				continue
			}
			d, changed := decidePartition(replicas, st, live, unclean)
			if !changed {
				continue
			}
			pr := proposal{tp: tp, from: st, to: d.state, kind: d.kind}
			if d.replicas != nil {
				tc := t
				pr.topic, pr.replicas = &tc, d.replicas
			}
			out = append(out, pr)
		}
	}
	return out
}

// repairTopic gives a topic written before replication (no replica
// lists, no partition keys) the single-broker layout it had: this broker
// holds every partition.
func repairTopic(v *view, t Topic, live liveness, selfID int32) []proposal {
	var out []proposal
	for p := int32(0); p < t.Partitions; p++ {
		tp := TopicPartition{t.Name, p}
		if _, ok := v.parts[tp]; ok {
			continue
		}
		replicas := t.Assignment(p)
		pr := proposal{tp: tp, kind: electClean}
		if replicas == nil {
			replicas = []int32{selfID}
			tc := t
			pr.topic, pr.replicas = &tc, replicas
		}
		pr.to = initialState(replicas, live)
		out = append(out, pr)
	}
	return out
}

// initialState is a new partition's state: ISR = the live replicas,
// leader = the first of them, epochs 0. With no live replica the
// partition starts offline with ISR = all replicas.
func initialState(replicas []int32, live liveness) PartitionState {
	isr := intersectLive(replicas, live)
	leader := NoLeader
	if len(isr) > 0 {
		leader = isr[0]
	} else {
		isr = slices.Clone(replicas)
	}
	return PartitionState{Leader: leader, ISR: isr}
}

func sortedTopics(v *view) []string {
	names := make([]string, 0, len(v.topics))
	for name := range v.topics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// reconcile runs one pass: plan, then write each proposal conditioned on
// the term. With rebalance, preferred replicas of imbalanced brokers
// take their leaderships back as well. It returns false if a write
// failed for a reason other than a stale version (which the next view
// change retries anyway), so the caller retries on a timer.
func (c *controller) reconcile(ctx context.Context, v *view, rebalance bool) bool {
	n := c.n
	if c.seen == nil {
		c.seen = registrations(v) // the term starts from what it sees
	}
	bounced := map[int32]bool{}
	for id, reg := range c.seen {
		if b, ok := v.brokers[id]; ok && b.registered != reg {
			bounced[id] = true
		}
	}
	props := plan(v, bounced, n.cfg.UncleanLeaderElection, n.cfg.NodeID)
	if rebalance {
		props = append(props, c.rebalance(v, props)...)
	}
	ok, transient := true, false
	for _, pr := range props {
		if err := c.write(ctx, pr); err != nil {
			ok = false
			if ctx.Err() == nil && !errors.Is(err, sdk.ErrVersionMismatch) {
				transient = true
				n.log.Warn("cluster: controller write failed", "partition", pr.tp, "err", err)
			}
		}
	}
	if ok {
		c.seen = registrations(v)
	}
	return !transient
}

func registrations(v *view) map[int32]int64 {
	m := make(map[int32]int64, len(v.brokers))
	for id, b := range v.brokers {
		m[id] = b.registered
	}
	return m
}

// rebalance proposes preferred elections for imbalanced brokers, except
// for partitions another proposal already changes.
func (c *controller) rebalance(v *view, props []proposal) []proposal {
	busy := map[TopicPartition]bool{}
	for _, pr := range props {
		busy[pr.tp] = true
	}
	parts := v.partitions()
	var out []proposal
	for _, tp := range imbalanced(parts, v.liveness(), c.n.cfg.LeaderImbalancePerBrokerPercentage) {
		if busy[tp] {
			continue
		}
		pv := parts[tp]
		next, err := preferredElection(pv.replicas, pv.state, v.liveness())
		if err == nil {
			out = append(out, proposal{tp: tp, from: pv.state, to: next, kind: electPreferred})
		}
	}
	return out
}

// write commits one proposal: a Txn conditioned on this term's
// /controller version, the partition's version and, when the replica
// list changes, the topic's version.
func (c *controller) write(ctx context.Context, pr proposal) error {
	conds := []sdk.Condition{
		{Key: controllerKey, Version: c.term.version},
		{Key: partitionKey(pr.tp.Topic, pr.tp.Partition), Version: pr.from.Version},
	}
	ops := []sdk.Op{{Type: sdk.OpPut, Key: partitionKey(pr.tp.Topic, pr.tp.Partition), Value: pr.to.encode()}}
	if pr.topic != nil {
		rec := withReplicas(pr.topic.TopicRecord, pr.tp.Partition, pr.replicas)
		conds = append(conds, sdk.Condition{Key: topicKey(pr.tp.Topic), Version: pr.topic.Version})
		ops = append(ops, sdk.Op{Type: sdk.OpPut, Key: topicKey(pr.tp.Topic), Value: encodeTopic(&rec)})
	}
	resp, err := c.n.store.Txn(ctx, &sdk.TxnRequest{Conditions: conds, Ops: ops})
	if err != nil {
		return err
	}
	c.lastWrite = max(c.lastWrite, resp.Revision)
	logChange(c.n, pr)
	return nil
}

// withReplicas returns rec with partition p's replica list set, filling
// absent lists of a pre-replication topic with the same list.
func withReplicas(rec TopicRecord, p int32, replicas []int32) TopicRecord {
	out := make([][]int32, max(int(rec.Partitions), int(p)+1))
	for i := range out {
		switch {
		case i == int(p):
			out[i] = replicas
		case i < len(rec.Replicas):
			out[i] = rec.Replicas[i]
		default:
			out[i] = replicas
		}
	}
	rec.Replicas = out
	return rec
}

func logChange(n *Node, pr proposal) {
	attrs := []any{"partition", pr.tp.String(), "leader", pr.to.Leader, "leader_epoch", pr.to.LeaderEpoch,
		"isr", pr.to.ISR, "partition_epoch", pr.to.PartitionEpoch}
	switch pr.kind {
	case electClean:
		n.elections.clean.Add(1)
	case electUnclean:
		n.elections.unclean.Add(1)
	}
	switch pr.kind {
	case electUnclean:
		n.log.Warn("cluster: unclean leader election: the new leader was not in the ISR; acknowledged records may be lost", attrs...)
	case electOffline:
		n.log.Warn("cluster: partition offline: no live in-sync replica", attrs...)
	case electNone:
		n.log.Info("cluster: ISR changed", attrs...)
	default:
		n.log.Info("cluster: leader elected ("+pr.kind.String()+")", attrs...)
	}
}
