package broker

// FindCoordinator v0-v6 tells a client which broker coordinates a group.
//
// Version notes: v1 adds the key type (0 group, 1 transaction) and an
// error message; v3 is flexible (KIP-482); v4 batches keys (KIP-699) and
// moves the answer into Coordinators; v6 adds key type 2 (share groups,
// KIP-932), which is not served (INVALID_REQUEST).
//
// A group's coordinator is the leader of __consumer_offsets partition
// abs(javaStringHashCode(group)) % partitions; the topic is created on
// first use. On one broker that leader is this broker, but it is computed
// the same way a cluster will. A transactional ID's coordinator (key type
// 1) is the leader of __transaction_state partition
// abs(javaStringHashCode(id)) % partitions, created on first use
// (txns.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleFindCoordinator(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		resp.Coordinators = append(resp.Coordinators, b.findCoordinator(ctx, req.Conn, r.CoordinatorType, key))
	}
	if r.Version < 4 && len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return reply(resp)
}

func (b *Broker) findCoordinator(ctx context.Context, conn *wire.ConnInfo, typ int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID = key, -1
	fail := func(code int16, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = code, &msg
		return c
	}
	switch typ {
	case 0:
	case 1:
		return b.findTxnCoordinator(ctx, c, key, fail)
	default:
		return fail(kerr.InvalidRequest.Code, "unknown coordinator key type")
	}
	if key == "" {
		return fail(kerr.InvalidRequest.Code, "group id is empty")
	}
	if code := b.coordinatorReady(ctx); code != 0 {
		return fail(code, "the group coordinator is not available")
	}
	t := b.topic(offsetsTopic)
	if t == nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "__consumer_offsets does not exist")
	}
	p := t.partition(group.PartitionFor(key, int32(len(t.partitions))))
	if p == nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "no leader")
	}
	// The coordinator is the partition's leader (on one broker, us).
	v := p.State().View
	bi, ok := b.brokerInfo(v.Leader)
	if v.Leader < 0 || !ok {
		return fail(kerr.CoordinatorNotAvailable.Code, "the coordinator's __consumer_offsets partition has no leader")
	}
	host, port, ok := endpointFor(bi, conn)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable.Code, "the coordinator has no listener named "+conn.Listener)
	}
	c.NodeID, c.Host, c.Port = bi.ID, host, port
	return c
}

// findTxnCoordinator answers key type 1 (transactional IDs).
func (b *Broker) findTxnCoordinator(ctx context.Context, c kmsg.FindCoordinatorResponseCoordinator, key string, fail func(int16, string) kmsg.FindCoordinatorResponseCoordinator) kmsg.FindCoordinatorResponseCoordinator {
	if key == "" {
		return fail(kerr.InvalidRequest.Code, "transactional id is empty")
	}
	if err := b.txns.ensureTopic(ctx); err != nil {
		b.logger.Warn("broker: transaction coordinator not available", "err", err)
		return fail(kerr.CoordinatorNotAvailable.Code, "__transaction_state can not be created")
	}
	p, _, ok := b.txns.partitionOf(key)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable.Code, "no __transaction_state partition")
	}
	v := p.State().View
	bi, ok := b.brokerInfo(v.Leader)
	if v.Leader < 0 || !ok {
		return fail(kerr.CoordinatorNotAvailable.Code, "the coordinator's __transaction_state partition has no leader")
	}
	c.NodeID, c.Host, c.Port = bi.ID, bi.Host, bi.Port
	return c
}
