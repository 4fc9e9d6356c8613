package group

import (
	"cmp"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// tpid names one partition by topic ID, as KIP-848 does.
type tpid struct {
	id        [16]byte
	partition int32
}

func compareTPID(a, b tpid) int {
	if c := slices.Compare(a.id[:], b.id[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// consumer is the state of a KIP-848 group. The group epoch grows whenever
// membership, a subscription or a subscribed topic's partition count
// changes; the target assignment is recomputed by the assignor for the
// new epoch, and each member then converges on its target through
// heartbeats: it first revokes what it must give up (keeping its epoch),
// then moves to the target epoch and takes the partitions nobody else
// holds any more.
//
// INVARIANT: a partition is in at most one member's assigned ∪ revoking,
// so a new owner gets a partition only after the previous owner revoked
// it.
type consumer struct {
	epoch           int32
	bump            bool // a change awaits the next epoch
	assignmentEpoch int32
	assignor        string
	target          map[string]map[tpid]bool // member ID → target partitions
	members         map[string]*cmember
	static          map[string]string // instance ID → member ID
	subMeta         map[string]int32  // subscribed topic → partitions, at the last epoch bump
	emptySince      time.Time
	// persisted holds the KIP-848 records of this group in the log (key →
	// value), so each step writes only what changed (consumer_records.go).
	persisted map[string][]byte
	// epochSeen is the epoch at the last invariant check (the invariants
	// build tag only).
	epochSeen int32
}

// cmember is one KIP-848 group member.
type cmember struct {
	id, instanceID, rack string
	clientID, clientHost string
	rebalanceTimeout     time.Duration
	names                []string
	regex                string
	re                   *regexp.Regexp
	assignorPref         string
	subscribed           map[string]bool // resolved: names and regex matches

	epoch, prevEpoch int32
	assigned         map[tpid]bool // partitions the member may consume
	revoking         map[tpid]bool // partitions it must give up first
	sessionDeadline  time.Time
	revokeDeadline   time.Time
	changed          bool // assignment changed since last sent
	// left is set when a static member left with epoch -2: it keeps its
	// assignment (nobody else gets those partitions) until its session
	// times out or its instance rejoins under a new member ID.
	left bool
}

func newConsumer(now time.Time) *consumer {
	return &consumer{
		target: map[string]map[tpid]bool{}, members: map[string]*cmember{},
		static: map[string]string{}, subMeta: map[string]int32{}, emptySince: now,
		persisted: map[string][]byte{},
	}
}

func (g *consumer) state() string {
	switch {
	case len(g.members) == 0:
		return StateEmpty
	case g.epoch > g.assignmentEpoch:
		return StateAssigning
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || len(m.revoking) > 0 || !maps.Equal(m.assigned, g.target[m.id]) {
			return StateReconciling
		}
	}
	return StateStable
}

func (g *consumer) nextDeadline() time.Time {
	var next time.Time
	for _, m := range g.members {
		for _, t := range []time.Time{m.sessionDeadline, m.revokeDeadline} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// owner reports whether a member other than m holds p (assigned or still
// revoking).
func (g *consumer) heldByOther(p tpid, m *cmember) bool {
	for _, o := range g.members {
		if o != m && (o.assigned[p] || o.revoking[p]) {
			return true
		}
	}
	return false
}

// resolve recomputes a member's subscribed topics from its names and
// regex. Internal topics never match a regex.
func (m *cmember) resolve(topics Topics) {
	m.subscribed = map[string]bool{}
	for _, n := range m.names {
		m.subscribed[n] = true
	}
	if m.re == nil {
		return
	}
	for _, n := range topics.Names() {
		if !strings.HasPrefix(n, "__") && m.re.MatchString(n) {
			m.subscribed[n] = true
		}
	}
}

// compileRegex compiles a KIP-848 subscription regex (RE2, matched
// against the whole topic name).
func compileRegex(s string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + s + ")$")
}

// subscriptionMeta maps every subscribed, existing topic to its partition
// count; a change bumps the group epoch.
func (g *consumer) subscriptionMeta(topics Topics) map[string]int32 {
	meta := map[string]int32{}
	for _, m := range g.members {
		for n := range m.subscribed {
			if t, ok := topics.Topic(n); ok {
				meta[n] = t.Partitions
			}
		}
	}
	return meta
}

// chooseAssignor picks the assignor most members ask for; ties and no
// preference go to the configured order.
func (c *Coordinator) chooseAssignor(g *consumer) sdk.Assignor {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignorPref != "" {
			votes[m.assignorPref]++
		}
	}
	var best sdk.Assignor
	for _, a := range c.cfg.Assignors {
		if best == nil || votes[a.Name()] > votes[best.Name()] {
			best = a
		}
	}
	return best
}

func (c *Coordinator) assignorKnown(name string) bool {
	for _, a := range c.cfg.Assignors {
		if a.Name() == name {
			return true
		}
	}
	return false
}

// assignmentInput builds the assignor's view of the group.
func (c *Coordinator) assignmentInput(id string, g *consumer) *sdk.Group {
	in := &sdk.Group{ID: id}
	seen := map[string]bool{}
	for _, mid := range sortedKeys(g.members) {
		m := g.members[mid]
		sm := sdk.Member{ID: m.id, InstanceID: m.instanceID, Rack: m.rack}
		sm.Topics = slices.Sorted(maps.Keys(m.subscribed))
		for p := range g.target[m.id] {
			if t, ok := c.cfg.Topics.TopicByID(p.id); ok {
				sm.Owned = append(sm.Owned, sdk.TopicPartition{Topic: t.Name, Partition: p.partition})
			}
		}
		slices.SortFunc(sm.Owned, sdk.TopicPartition.Compare)
		in.MemberSet = append(in.MemberSet, sm)
		for _, n := range sm.Topics {
			if t, ok := c.cfg.Topics.Topic(n); ok && !seen[n] {
				seen[n] = true
				in.Topics = append(in.Topics, sdk.Topic{Name: n, Partitions: t.Partitions})
			}
		}
	}
	return in
}
