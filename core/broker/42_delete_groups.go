package broker

// DeleteGroups v0-v3 deletes groups and their offsets. Only a group with
// no members can be deleted: NON_EMPTY_GROUP otherwise; an unknown group
// is GROUP_ID_NOT_FOUND.
//
// Version notes: v1 adds throttling; v2 is flexible; v3 adds an error
// message.
//
// The group's metadata and offsets become tombstones in
// __consumer_offsets before the response is sent. Each group whose
// __consumer_offsets partition is loading here answers
// COORDINATOR_LOAD_IN_PROGRESS, one not led here NOT_COORDINATOR.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/wire"
)

func handleDeleteGroups(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DeleteGroupsRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range r.Groups {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, dg)
		}
		return reply(resp)
	}
	w := newWaiter()
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.DeleteGroups(now, r, w) })
	return await(ctx, w)
}
