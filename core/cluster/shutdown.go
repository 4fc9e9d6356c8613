package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/vltava/vltava/plugins/sdk"
)

// ShutDown is Kafka's controlled shutdown. The broker marks its
// registration shutting_down; the controller (possibly this Node) then
// moves every leadership it holds to another eligible ISR member and
// takes it out of the ISRs. ShutDown returns once the broker leads no
// partition that another live ISR member could take over, or after
// Config.ShutdownTimeout (or ctx) — then logging what it still leads —
// and ends the session, so the registration (and a controllership) go
// at once. The Node keeps watching until Close; it never registers
// again.
func (n *Node) ShutDown(ctx context.Context) error {
	if err := n.markShuttingDown(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
	defer cancel()
	done := n.waitView(wctx, func(v *view) bool { return len(movableLeaderships(v, n.cfg.NodeID)) == 0 })
	if !done {
		n.log.Warn("cluster: controlled shutdown timed out; still leading",
			"partitions", movableLeaderships(n.snapshot(), n.cfg.NodeID))
	} else {
		n.log.Info("cluster: controlled shutdown: leaderships moved")
	}
	n.mu.Lock()
	n.shutdown = true
	n.signalLocked()
	n.mu.Unlock()
	n.revoke()
	return nil
}

// markShuttingDown sets shutting_down in this broker's registration.
func (n *Node) markShuttingDown(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		cur, err := n.store.Get(ctx, &sdk.GetRequest{Key: brokerKey(n.cfg.NodeID)})
		if err != nil {
			return fmt.Errorf("cluster: controlled shutdown: %w", err)
		}
		info, err := decodeBroker(cur.Value)
		if err != nil {
			return err
		}
		if info.Incarnation != n.incarnation {
			return fmt.Errorf("cluster: controlled shutdown: registration belongs to incarnation %s", info.Incarnation)
		}
		info.ShuttingDown = true
		raw, _ := json.Marshal(info)
		_, err = n.store.Put(ctx, &sdk.PutRequest{Key: brokerKey(n.cfg.NodeID), Value: raw, ExpectVersion: cur.Version, Session: cur.Session})
		if errors.Is(err, sdk.ErrVersionMismatch) && attempt < casAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("cluster: controlled shutdown: %w", err)
		}
		n.log.Info("cluster: controlled shutdown: moving leaderships away")
		return nil
	}
}

// movableLeaderships are the partitions broker id leads that some other
// live, not shutting-down ISR member could lead.
func movableLeaderships(v *view, id int32) []TopicPartition {
	live := v.liveness()
	var out []TopicPartition
	for tp, pv := range v.partitions() {
		if pv.state.Leader != id {
			continue
		}
		if firstOf(pv.replicas, pv.state.ISR, live.eligible, id) != NoLeader {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, comparePartitions)
	return out
}
