package group

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/plugins/sdk"
)

// fakeTopics is a fixed topic set.
type fakeTopics map[string]TopicInfo

func (f fakeTopics) Topic(n string) (TopicInfo, bool) { t, ok := f[n]; return t, ok }
func (f fakeTopics) TopicByID(id [16]byte) (TopicInfo, bool) {
	for _, t := range f {
		if t.ID == id {
			return t, true
		}
	}
	return TopicInfo{}, false
}
func (f fakeTopics) Names() []string { return sortedKeys(f) }

func topics(specs ...any) fakeTopics {
	f := fakeTopics{}
	for i := 0; i < len(specs); i += 2 {
		name := specs[i].(string)
		f[name] = TopicInfo{Name: name, ID: [16]byte{byte(i/2 + 1)}, Partitions: int32(specs[i+1].(int))}
	}
	return f
}

// deal is a test assignor: partition i goes to member i mod n among the
// subscribed members, sorted by ID.
type deal struct{}

func (deal) Name() string { return "deal" }
func (deal) Assign(_ context.Context, g *sdk.Group) (*sdk.Plan, error) {
	plan := g.NewPlan()
	ms := g.Members()
	for i, tp := range g.Partitions() {
		var subs []string
		for _, m := range ms {
			if slices.Contains(m.Topics, tp.Topic) {
				subs = append(subs, m.ID)
			}
		}
		plan.Assign(subs[i%len(subs)], tp)
	}
	return plan, nil
}

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func testCoordinator(tp fakeTopics) *Coordinator {
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 100 * time.Millisecond
	cfg.MinSessionTimeout = 100 * time.Millisecond
	cfg.ConsumerSessionTimeout = time.Second
	cfg.ConsumerHeartbeatInterval = 100 * time.Millisecond
	cfg.Assignors = []sdk.Assignor{deal{}}
	cfg.Topics = tp
	c := New(cfg)
	ownAll(c)
	return c
}

// ownAll loads every (empty) __consumer_offsets partition, as a single
// broker that leads them all does.
func ownAll(c *Coordinator) {
	for p := int32(0); p < c.cfg.OffsetsPartitions; p++ {
		l, _ := c.BeginLoad(t0, p, 0)
		c.FinishLoad(t0, l)
	}
}

func joinReq(group, member string, instance *string, protocols ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID, r.InstanceID, r.ProtocolType = group, member, instance, "consumer"
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 1000, 2000
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(p)})
	}
	return r
}

// replyTo finds the reply for w in out.
func replyTo[R kmsg.Response](t *testing.T, out Output, w Waiter) R {
	t.Helper()
	for _, r := range out.Replies {
		if r.To == w {
			return r.Resp.(R)
		}
	}
	var zero R
	t.Fatalf("no reply for %v in %d replies", w, len(out.Replies))
	return zero
}

func hasReply(out Output, w Waiter) bool {
	for _, r := range out.Replies {
		if r.To == w {
			return true
		}
	}
	return false
}
