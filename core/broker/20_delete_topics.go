package broker

// DeleteTopics v0-v6. v1 adds throttle time, v4 is flexible, v5 adds error
// messages, v6 names topics by name or ID.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

func handleDeleteTopics(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if r.Version >= 6 {
		for _, t := range r.Topics {
			targets = append(targets, target{t.Topic, t.TopicID})
		}
	} else {
		for _, n := range r.TopicNames {
			targets = append(targets, target{name: kmsg.StringPtr(n)})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var t *topic
		if tg.name != nil {
			t = b.topic(*tg.name)
		} else {
			t = b.topicByID(tg.id)
		}
		code, msg := kerr.UnknownTopicOrPartition.Code, "topic does not exist"
		switch {
		case t == nil && tg.name == nil:
			code, msg = kerr.UnknownTopicID.Code, fmt.Sprintf("no topic has ID %x", tg.id)
		case t == nil:
		case !b.cfg.DeleteTopicEnable:
			code, msg = kerr.TopicDeletionDisabled.Code, "delete.topic.enable is false"
		default:
			st.Topic, st.TopicID = kmsg.StringPtr(t.name), t.id
			code, msg = b.deleteTopic(ctx, t)
		}
		st.ErrorCode = code
		if code != 0 && r.Version >= 5 {
			st.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
