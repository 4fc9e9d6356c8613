package sdk

import (
	"cmp"
	"context"
	"slices"
	"strings"
)

// Assignor computes partition assignments for a consumer group whose
// assignment runs on the broker (KIP-848 "server-side" assignors, named by
// the client in group.remote.assignor).
//
// Threading: Assign may be called concurrently for different groups; it
// must not keep or modify the Group it is given.
//
// Contract (checked by plugintest.Assignor): every partition of a topic
// that at least one member subscribes to is assigned to exactly one member,
// and only to a member subscribed to its topic; partitions of unsubscribed
// or unknown topics are not assigned. The result depends only on the
// Group's content: MemberSet and Topics are sets, so their slice order must
// not change the plan. A group with no members or no partitions yields an
// empty plan, not an error. An error fails the assignment round; the
// broker keeps the previous assignment and retries later.
type Assignor interface {
	// Name is the name clients select the assignor by ("range",
	// "uniform", ...). It must be stable and non-empty.
	Name() string

	// Assign returns the target assignment for the group.
	Assign(ctx context.Context, g *Group) (*Plan, error)
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Compare orders partitions by topic, then partition.
func (tp TopicPartition) Compare(o TopicPartition) int {
	if c := cmp.Compare(tp.Topic, o.Topic); c != 0 {
		return c
	}
	return cmp.Compare(tp.Partition, o.Partition)
}

// Member is one group member as the assignor sees it.
type Member struct {
	ID         string           // member ID, unique in the group
	InstanceID string           // static membership (group.instance.id); "" if none
	Rack       string           // client.rack; "" if unknown
	Topics     []string         // subscribed topics
	Owned      []TopicPartition // partitions the member currently owns
	UserData   []byte           // opaque client data (classic protocol metadata)
}

// Subscribes reports whether the member subscribes to topic.
func (m *Member) Subscribes(topic string) bool {
	return slices.Contains(m.Topics, topic)
}

// Topic is one topic the group may consume.
type Topic struct {
	Name       string
	Partitions int32 // partition count; partitions are 0..Partitions-1
	// Racks optionally lists, per partition, the racks of its replicas
	// (Racks[p] for partition p), for rack-aware assignors. nil if unknown.
	Racks [][]string
}

// Group is the input of an assignment round.
type Group struct {
	ID string
	// MemberSet holds the members; order carries no meaning (use the
	// Members method for a sorted copy).
	MemberSet []Member
	// Topics holds the subscribed topics that exist; order carries no
	// meaning.
	Topics []Topic
}

// Members returns the members sorted by ID (a new slice; the members are
// shallow copies).
func (g *Group) Members() []Member {
	ms := slices.Clone(g.MemberSet)
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return ms
}

// Partitions returns every partition of every topic at least one member
// subscribes to, sorted by (topic, partition).
func (g *Group) Partitions() []TopicPartition {
	subscribed := make(map[string]bool)
	for i := range g.MemberSet {
		for _, t := range g.MemberSet[i].Topics {
			subscribed[t] = true
		}
	}
	// Sorting the topics (not the partitions) is enough: each topic's
	// partitions come out in order. A topic listed twice counts once.
	topics := make([]Topic, 0, len(g.Topics))
	n := 0
	for _, t := range g.Topics {
		if subscribed[t.Name] {
			topics = append(topics, t)
		}
	}
	slices.SortStableFunc(topics, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	topics = slices.CompactFunc(topics, func(a, b Topic) bool { return a.Name == b.Name })
	for _, t := range topics {
		n += int(max(t.Partitions, 0))
	}
	tps := make([]TopicPartition, 0, n)
	for _, t := range topics {
		for p := range t.Partitions {
			tps = append(tps, TopicPartition{Topic: t.Name, Partition: p})
		}
	}
	return tps
}

func (g *Group) NewPlan() *Plan {
	p := &Plan{Assignments: make(map[string][]TopicPartition, len(g.MemberSet))}
	for i := range g.MemberSet {
		p.Assignments[g.MemberSet[i].ID] = nil
	}
	return p
}

// Plan is an assignor's result: member ID → partitions.
type Plan struct {
	Assignments map[string][]TopicPartition
}

// Assign gives the partitions to the member.
func (p *Plan) Assign(memberID string, tps ...TopicPartition) {
	if p.Assignments == nil {
		p.Assignments = make(map[string][]TopicPartition)
	}
	p.Assignments[memberID] = append(p.Assignments[memberID], tps...)
}
