package broker

// JoinGroup v0-v9 joins a classic group; the response waits until the
// rebalance completes (core/group decides when).
//
// Version notes: v1 adds the rebalance timeout; v4 requires a member ID
// (KIP-394: a first join without one gets MEMBER_ID_REQUIRED and the ID
// to use); v5 adds group.instance.id (static membership, KIP-345); v6 is
// flexible; v7 returns the protocol type; v8 adds a reason; v9 lets a
// rejoining leader skip assignment (KIP-814).
//
// The request holds its connection until the rebalance completes, as in
// Kafka (a connection's requests are served one at a time); it ends with
// no response when the connection or the broker closes.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleJoinGroup(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.JoinGroupRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, r.MemberID
		return reply(resp)
	}
	w := newWaiter()
	cl := clientOf(req)
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.JoinGroup(now, cl, r, w) })
	return await(ctx, w)
}
