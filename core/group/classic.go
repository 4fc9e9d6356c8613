package group

import (
	"bytes"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classic is the state of a classic group (JoinGroup/SyncGroup). The
// state machine, as in Kafka:
//
//	Empty ──join──▶ PreparingRebalance ──all joined / deadline──▶ CompletingRebalance
//	  ▲                  ▲    │ (no members left)                       │ leader syncs
//	  └──────────────────┼────┘                                         ▼
//	                     └────── join, leave, expiry, new protocol ── Stable
//
// and Dead once deleted.
type classic struct {
	state        string
	stateSince   time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string    // group.instance.id → member ID
	pending      map[string]time.Time // KIP-394 member IDs handed out → expiry
	// rebalanceDeadline ends PreparingRebalance even if members are
	// missing; initialDelayCap is the hard end of the initial delay of a
	// group's first rebalance (zero when not delaying).
	rebalanceDeadline time.Time
	initialDelayCap   time.Time
	seq               uint64 // join order, for choosing a leader
	// genSeen is the generation at the last invariant check (the
	// invariants build tag only).
	genSeen int32
}

// member is one classic group member.
type member struct {
	id, instanceID       string
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocolType         string
	protocols            []kmsg.JoinGroupRequestProtocol
	assignment           []byte
	seq                  uint64

	// joinW and syncW are the waiting JoinGroup and SyncGroup requests;
	// joinV and syncV their versions, for the delayed responses.
	joinW, syncW      Waiter
	joining, syncing  bool
	joinV, syncV      int16
	heartbeatDeadline time.Time
}

func newClassic(now time.Time) *classic {
	return &classic{
		state: StateEmpty, stateSince: now,
		members: map[string]*member{}, static: map[string]string{}, pending: map[string]time.Time{},
	}
}

func (g *classic) setState(s string, now time.Time) {
	g.state, g.stateSince = s, now
}

func (g *classic) nextDeadline() time.Time {
	var next time.Time
	take := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if g.state == StatePreparingRebalance {
		take(g.rebalanceDeadline)
	}
	for _, m := range g.members {
		take(m.heartbeatDeadline)
	}
	for _, t := range g.pending {
		take(t)
	}
	return next
}

// metadataFor returns a member's metadata for protocol name.
func (m *member) metadataFor(name string) ([]byte, bool) {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata, true
		}
	}
	return nil, false
}

func (m *member) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// supports reports whether every member supports one of ps, so a joining
// member with ps can be admitted (INCONSISTENT_GROUP_PROTOCOL otherwise).
func (g *classic) supports(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.members {
			if _, ok := m.metadataFor(p.Name); !ok {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports that gets the
// most votes, each member voting for the first protocol it lists among
// the candidates; ties go to the candidate listed first by the leader.
func (g *classic) selectProtocol() string {
	var candidates []string
	for _, p := range g.members[g.leaderOrFirst()].protocols {
		all := true
		for _, m := range g.members {
			if _, ok := m.metadataFor(p.Name); !ok {
				all = false
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// leaderOrFirst is the current leader if still a member, else the member
// that joined first.
func (g *classic) leaderOrFirst() string {
	if _, ok := g.members[g.leader]; ok {
		return g.leader
	}
	var first *member
	for _, m := range g.members {
		if first == nil || m.seq < first.seq {
			first = m
		}
	}
	if first == nil {
		return ""
	}
	return first.id
}

// subscribes reports whether a member's consumer subscription (protocol
// type "consumer") names topic.
func (g *classic) subscribes(topic string) bool {
	if g.protocolType != "consumer" || g.protocol == "" {
		return false
	}
	for _, m := range g.members {
		raw, _ := m.metadataFor(g.protocol)
		var md kmsg.ConsumerMemberMetadata
		if md.ReadFrom(raw) == nil && slices.Contains(md.Topics, topic) {
			return true
		}
	}
	return false
}

// checkMember applies the fencing rules shared by SyncGroup, Heartbeat,
// OffsetCommit and LeaveGroup: the member must exist, and a static
// member's instance must still map to it.
func (g *classic) checkMember(memberID string, instanceID *string) (*member, *kerr.Error) {
	if instanceID != nil && *instanceID != "" {
		if id, ok := g.static[*instanceID]; ok && id != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

func (g *classic) removeMember(m *member) {
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
}
