package broker

// OffsetFetch v0-v9 returns a group's committed offsets.
//
// Version notes: v2 lets a null topic list mean "every committed
// partition" and adds a top-level error; v5 the leader epoch; v6 is
// flexible; v7 RequireStable (KIP-447; nothing is unstable without
// transactions); v8 fetches several groups at once (KIP-709); v9 takes a
// KIP-848 member ID and epoch (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
// v10 (topic IDs) is not served yet.
//
// A partition without a committed offset answers offset -1, leader epoch
// -1 and empty metadata; an unknown group answers the same, not an error.
// A group whose __consumer_offsets partition is still loading here answers
// COORDINATOR_LOAD_IN_PROGRESS, never -1 (the consumer would reset); one
// not led here NOT_COORDINATOR; each group of a v8+ request on its own.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleOffsetFetch(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.OffsetFetchRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = code
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			resp.Groups = append(resp.Groups, rg)
		}
		return reply(resp)
	}
	var resp *kmsg.OffsetFetchResponse
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		resp = c.OffsetFetch(now, r)
		return group.Output{}
	})
	return reply(resp)
}
