package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
)

// coordinated wraps a group API handler: in cluster mode a request for a
// group whose __consumer_offsets partition this broker does not lead is
// answered NOT_COORDINATOR, so the client looks the coordinator up again
// (it moves with the partition's leadership).
func coordinated(h handlerFunc) handlerFunc {
	return func(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
		if resp := notCoordinator(b, req.Body); resp != nil {
			return reply(resp)
		}
		return h(b, ctx, req)
	}
}

// notCoordinator returns a NOT_COORDINATOR response for a single-group
// request this broker does not coordinate, or nil to serve it.
func notCoordinator(b *Broker, body kmsg.Request) kmsg.Response {
	code := kerr.NotCoordinator.Code
	switch r := body.(type) {
	case *kmsg.JoinGroupRequest:
		if !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.SyncGroupRequest:
		if !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.HeartbeatRequest:
		if !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.LeaveGroupRequest:
		if !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.OffsetCommitRequest:
		if !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, rt := range r.Topics {
				st := kmsg.NewOffsetCommitResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewOffsetCommitResponseTopicPartition()
					sp.Partition, sp.ErrorCode = rp.Partition, code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 && !b.coordinates(r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = code
			return resp
		}
		if r.Version >= 8 && len(r.Groups) == 1 && !b.coordinates(r.Groups[0].Group) {
			resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = r.Groups[0].Group, code
			resp.Groups = append(resp.Groups, g)
			return resp
		}
	}
	return nil
}
