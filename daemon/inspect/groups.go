package inspect

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Group is a consumer group's summary.
type Group struct {
	Name, State, Protocol, ProtocolType string
	Coordinator                         int32
	Members                             int
	Lag                                 int64 // summed over partitions with a commit; -1 when unknown
}

// Member is one group member and what it was assigned.
type Member struct {
	ID, InstanceID, ClientID, Host string
	Assigned                       []string // "topic-partition"
}

// PartitionLag is one partition's committed offset, end and lag.
type PartitionLag struct {
	Topic     string
	Partition int32
	Member    string
	Committed int64
	End       int64
	Lag       int64
	Error     string
}

// GroupDetail is one group's members and lag.
type GroupDetail struct {
	Group
	MemberList []Member
	Lags       []PartitionLag
}

// Groups lists every group with its lag (from every coordinator: the
// console shows the cluster, not one broker).
func (in *Inspector) Groups(ctx context.Context) ([]Group, error) {
	adm, err := in.Admin()
	if err != nil {
		return nil, err
	}
	lags, err := adm.Lag(ctx)
	if err != nil {
		return nil, err
	}
	var out []Group
	for _, l := range lags.Sorted() {
		out = append(out, summarize(l))
	}
	return out, nil
}

func summarize(l kadm.DescribedGroupLag) Group {
	g := Group{Name: l.Group, State: l.State, Protocol: l.Protocol, ProtocolType: l.ProtocolType,
		Coordinator: l.Coordinator.NodeID, Members: len(l.Members), Lag: -1}
	if l.Error() == nil {
		g.Lag = 0
		for _, ml := range l.Lag.Sorted() {
			if ml.Lag > 0 {
				g.Lag += ml.Lag
			}
		}
	}
	return g
}

// Group reads one group; ok is false when it does not exist.
func (in *Inspector) Group(ctx context.Context, name string) (GroupDetail, bool, error) {
	adm, err := in.Admin()
	if err != nil {
		return GroupDetail{}, false, err
	}
	lags, err := adm.Lag(ctx, name)
	if err != nil {
		return GroupDetail{}, false, err
	}
	l, found := lags[name]
	if !found || (l.State == "Dead" && len(l.Lag) == 0) {
		return GroupDetail{}, false, nil
	}
	d := GroupDetail{Group: summarize(l)}
	for _, m := range l.Members {
		mv := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.InstanceID != nil {
			mv.InstanceID = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				for _, p := range t.Partitions {
					mv.Assigned = append(mv.Assigned, t.Topic+"-"+itoa(p))
				}
			}
		}
		d.MemberList = append(d.MemberList, mv)
	}
	for _, ml := range l.Lag.Sorted() {
		pl := PartitionLag{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			pl.Member = ml.Member.ClientID
		}
		if ml.Err != nil {
			pl.Error = ml.Err.Error()
		}
		d.Lags = append(d.Lags, pl)
	}
	return d, true, nil
}

// LagHistory keeps each group's total lag over time, sampled by its owner
// (the console) every Interval, for the small charts.
type LagHistory struct {
	mu      sync.Mutex
	samples map[string][]LagSample
	keep    int
}

// LagSample is one group's lag at one time.
type LagSample struct {
	At  time.Time
	Lag int64
}

// NewLagHistory keeps the last keep samples per group.
func NewLagHistory(keep int) *LagHistory {
	return &LagHistory{samples: map[string][]LagSample{}, keep: keep}
}

// Sample records every group's lag now; groups gone are dropped.
func (h *LagHistory) Sample(gs []Group, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, g := range gs {
		seen[g.Name] = true
		if g.Lag < 0 {
			continue
		}
		s := append(h.samples[g.Name], LagSample{At: now, Lag: g.Lag})
		if len(s) > h.keep {
			s = s[len(s)-h.keep:]
		}
		h.samples[g.Name] = s
	}
	for name := range h.samples {
		if !seen[name] {
			delete(h.samples, name)
		}
	}
}

// Of returns a group's samples, oldest first.
func (h *LagHistory) Of(group string) []LagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]LagSample(nil), h.samples[group]...)
}

// Groups names the groups with samples, sorted.
func (h *LagHistory) Groups() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for g := range h.samples {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
