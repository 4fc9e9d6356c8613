package group

import (
	"time"
)

// Group states, as Kafka names them. Classic groups use the first five;
// KIP-848 groups use Empty, Assigning, Reconciling, Stable and Dead.
const (
	StateEmpty               = "Empty"
	StatePreparingRebalance  = "PreparingRebalance"
	StateCompletingRebalance = "CompletingRebalance"
	StateStable              = "Stable"
	StateDead                = "Dead"
	StateAssigning           = "Assigning"
	StateReconciling         = "Reconciling"
)

// Group types, as ListGroups v5+ reports them.
const (
	TypeClassic  = "classic"
	TypeConsumer = "consumer"
)

// tp names one partition by topic name.
type tp struct {
	topic     string
	partition int32
}

// offset is one committed offset.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
	// expireMs is an explicit expiry (OffsetCommit v2-v4
	// RetentionTimeMillis); 0 means offsets.retention.minutes applies.
	expireMs int64
}

// group is one group: its committed offsets and exactly one of a classic
// or a KIP-848 ("consumer") protocol state. A group known only by its
// offsets is a classic group with no members.
//
// INVARIANT: exactly one of classic and consumer is non-nil.
type group struct {
	id       string
	offsets  map[tp]offset
	classic  *classic
	consumer *consumer
}

func newClassicGroup(id string, now time.Time) *group {
	return &group{id: id, offsets: map[tp]offset{}, classic: newClassic(now)}
}

func (g *group) state() string {
	if g.consumer != nil {
		return g.consumer.state()
	}
	return g.classic.state
}

func (g *group) typ() string {
	if g.consumer != nil {
		return TypeConsumer
	}
	return TypeClassic
}

func (g *group) protocolType() string {
	if g.consumer != nil {
		return "consumer"
	}
	return g.classic.protocolType
}

// empty reports whether the group has no members.
func (g *group) empty() bool {
	if g.consumer != nil {
		return len(g.consumer.members) == 0
	}
	return len(g.classic.members) == 0 && len(g.classic.pending) == 0
}

// emptySince is when the group last became empty, for offsets retention.
func (g *group) emptySince() time.Time {
	if g.consumer != nil {
		return g.consumer.emptySince
	}
	return g.classic.stateSince
}

func (g *group) nextDeadline() time.Time {
	if g.consumer != nil {
		return g.consumer.nextDeadline()
	}
	return g.classic.nextDeadline()
}

// subscribes reports whether a member of the group consumes topic
// (OffsetDelete refuses such offsets).
func (g *group) subscribes(topic string) bool {
	if g.consumer != nil {
		for _, m := range g.consumer.members {
			if m.subscribed[topic] {
				return true
			}
		}
		return false
	}
	return g.classic.subscribes(topic)
}

// group returns the group named id, nil if unknown.
func (c *Coordinator) group(id string) *group { return c.groups[id] }
