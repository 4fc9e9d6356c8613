package serve

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// The Assign messages' compact layout (topic table, shared
// subscriptions, packed partition runs) is described in plugin.proto.

// errBadAssign marks an Assign message that breaks the layout: an index
// or run length out of range. It wraps sdk.ErrInvalidArgument.
var errBadAssign = fmt.Errorf("serve: malformed assign message: %w", sdk.ErrInvalidArgument)

// topicTable assigns topic names their index in a message's topic_names.
type topicTable struct {
	names []string
	index map[string]int32
	last  int32 // the index of most recent name looked up
}

func newTopicTable(sizeHint int) *topicTable {
	return &topicTable{index: make(map[string]int32, sizeHint)}
}

func (t *topicTable) of(name string) int32 {
	if len(t.names) > 0 && t.names[t.last] == name {
		return t.last
	}
	if i, ok := t.index[name]; ok {
		t.last = i
		return i
	}
	i := int32(len(t.names))
	t.names = append(t.names, name)
	t.index[name] = i
	t.last = i
	return i
}

// appendRuns appends tps to runs as partition runs.
func (t *topicTable) appendRuns(runs []int32, tps []sdk.TopicPartition) []int32 {
	for i := 0; i < len(tps); {
		j := i + 1
		for j < len(tps) && tps[j].Topic == tps[i].Topic {
			j++
		}
		runs = append(runs, t.of(tps[i].Topic), int32(j-i))
		for _, tp := range tps[i:j] {
			runs = append(runs, tp.Partition)
		}
		i = j
	}
	return runs
}

// countTopicRuns returns how many runs appendRuns makes of tps.
func countTopicRuns(tps []sdk.TopicPartition) int {
	n := 0
	for i := range tps {
		if i == 0 || tps[i].Topic != tps[i-1].Topic {
			n++
		}
	}
	return n
}

// countRuns checks runs against a table of n topics and returns how many
// partitions they hold.
func countRuns(runs []int32, n int) (int, error) {
	total := 0
	for i := 0; i < len(runs); {
		if len(runs)-i < 2 {
			return 0, fmt.Errorf("%w: truncated partition run", errBadAssign)
		}
		topic, size := runs[i], runs[i+1]
		if topic < 0 || int(topic) >= n {
			return 0, fmt.Errorf("%w: topic index %d of %d", errBadAssign, topic, n)
		}
		if size < 0 || int(size) > len(runs)-i-2 {
			return 0, fmt.Errorf("%w: partition run of %d past the end", errBadAssign, size)
		}
		total += int(size)
		i += 2 + int(size)
	}
	return total, nil
}

// appendFromRuns decodes runs checked by countRuns onto out.
func appendFromRuns(out []sdk.TopicPartition, runs []int32, names []string) []sdk.TopicPartition {
	for i := 0; i < len(runs); {
		name, size := names[runs[i]], int(runs[i+1])
		for _, p := range runs[i+2 : i+2+size] {
			out = append(out, sdk.TopicPartition{Topic: name, Partition: p})
		}
		i += 2 + size
	}
	return out
}

// lists is the partition lists of several members: a lengths column over
// one packed field (see plugin.proto).
type lists struct {
	lengths []int32
	flat    []int32
}

// appendList adds the next member's list.
func (l *lists) appendList(tt *topicTable, tps []sdk.TopicPartition) {
	n := len(l.flat)
	l.flat = tt.appendRuns(l.flat, tps)
	l.lengths = append(l.lengths, int32(len(l.flat)-n))
}

// decode checks l against members members and a table of names and
// returns every member's partitions, as clipped windows of one allocation
// (nil for an empty list).
func (l lists) decode(members int, names []string) ([][]sdk.TopicPartition, error) {
	out := make([][]sdk.TopicPartition, members)
	if len(l.lengths) == 0 && len(l.flat) == 0 {
		return out, nil
	}
	if len(l.lengths) != members {
		return nil, fmt.Errorf("%w: %d list lengths for %d members", errBadAssign, len(l.lengths), members)
	}
	total, off := 0, 0
	for _, n := range l.lengths {
		if n < 0 || int(n) > len(l.flat)-off {
			return nil, fmt.Errorf("%w: list of %d past the end", errBadAssign, n)
		}
		c, err := countRuns(l.flat[off:off+int(n)], len(names))
		if err != nil {
			return nil, err
		}
		total, off = total+c, off+int(n)
	}
	if off != len(l.flat) {
		return nil, fmt.Errorf("%w: %d partition list values, lengths cover %d", errBadAssign, len(l.flat), off)
	}
	all := make([]sdk.TopicPartition, 0, total)
	off = 0
	for i, n := range l.lengths {
		start := len(all)
		all = appendFromRuns(all, l.flat[off:off+int(n)], names)
		if len(all) > start {
			out[i] = all[start:len(all):len(all)]
		}
		off += int(n)
	}
	return out, nil
}

// column checks that an optional column has no entries or one per member.
func column[T any](name string, col []T, members int) error {
	if len(col) != 0 && len(col) != members {
		return fmt.Errorf("%w: %d %s for %d members", errBadAssign, len(col), name, members)
	}
	return nil
}

// at returns col[i], or the zero value for an empty column.
func at[T any](col []T, i int) T {
	var zero T
	if len(col) == 0 {
		return zero
	}
	return col[i]
}

func groupToPB(g *sdk.Group) *pluginpb.AssignRequest {
	tt := newTopicTable(len(g.Topics))
	n := len(g.MemberSet)
	req := &pluginpb.AssignRequest{
		GroupId:             g.ID,
		Topics:              make([]*pluginpb.Topic, 0, len(g.Topics)),
		MemberIds:           make([]string, n),
		MemberSubscriptions: make([]int32, n),
	}
	for _, t := range g.Topics {
		pt := &pluginpb.Topic{Name: tt.of(t.Name), Partitions: t.Partitions, HasRacks: t.Racks != nil}
		for _, r := range t.Racks {
			pt.Racks = append(pt.Racks, &pluginpb.PartitionRacks{Racks: r})
		}
		req.Topics = append(req.Topics, pt)
	}
	subs := subscriptionTable{tt: tt}
	var owned lists
	var instances, racks []string
	var userData [][]byte
	for i := range g.MemberSet {
		m := &g.MemberSet[i]
		req.MemberIds[i] = m.ID
		req.MemberSubscriptions[i] = subs.of(m.Topics)
		owned.appendList(tt, m.Owned)
		instances = setColumn(instances, n, i, m.InstanceID)
		racks = setColumn(racks, n, i, m.Rack)
		userData = setColumn(userData, n, i, m.UserData)
	}
	if len(owned.flat) > 0 {
		req.OwnedLengths, req.Owned = owned.lengths, owned.flat
	}
	req.InstanceIds, req.Racks, req.UserData = instances, racks, userData
	req.TopicNames, req.Subscriptions = tt.names, subs.pb
	return req
}

// setColumn sets entry i of an optional column of n entries, creating
// the column at the first non-empty value.
func setColumn[T string | []byte](col []T, n, i int, v T) []T {
	if len(v) == 0 {
		return col
	}
	if col == nil {
		col = make([]T, n)
	}
	col[i] = v
	return col
}

// subscriptionTable collects the distinct subscribed-topic lists.
type subscriptionTable struct {
	tt    *topicTable
	lists [][]string
	pb    []*pluginpb.Subscription
}

// of returns the index of topics' list. Members nearly always share a
// subscription, so a linear scan from the most recent list is cheap.
func (s *subscriptionTable) of(topics []string) int32 {
	for i := len(s.lists) - 1; i >= 0; i-- {
		if slices.Equal(s.lists[i], topics) {
			return int32(i)
		}
	}
	sub := &pluginpb.Subscription{Topics: make([]int32, len(topics))}
	for i, t := range topics {
		sub.Topics[i] = s.tt.of(t)
	}
	s.lists = append(s.lists, topics)
	s.pb = append(s.pb, sub)
	return int32(len(s.lists) - 1)
}

func groupFromPB(req *pluginpb.AssignRequest) (*sdk.Group, error) {
	names := req.TopicNames
	name := func(i int32) (string, error) {
		if i < 0 || int(i) >= len(names) {
			return "", fmt.Errorf("%w: topic index %d of %d", errBadAssign, i, len(names))
		}
		return names[i], nil
	}
	// Members with the same subscription share its slice (clipped; the
	// Assignor contract forbids modifying the Group).
	subs := make([][]string, len(req.Subscriptions))
	for i, s := range req.Subscriptions {
		if len(s.Topics) == 0 {
			continue
		}
		subs[i] = make([]string, len(s.Topics))
		for j, ti := range s.Topics {
			n, err := name(ti)
			if err != nil {
				return nil, err
			}
			subs[i][j] = n
		}
	}
	n := len(req.MemberIds)
	if len(req.MemberSubscriptions) != n {
		return nil, fmt.Errorf("%w: %d subscriptions for %d members", errBadAssign, len(req.MemberSubscriptions), n)
	}
	if err := errors.Join(column("instance IDs", req.InstanceIds, n), column("racks", req.Racks, n),
		column("user data", req.UserData, n)); err != nil {
		return nil, err
	}
	owned, err := lists{req.OwnedLengths, req.Owned}.decode(n, names)
	if err != nil {
		return nil, err
	}
	g := &sdk.Group{ID: req.GroupId, MemberSet: make([]sdk.Member, n)}
	for i, id := range req.MemberIds {
		si := req.MemberSubscriptions[i]
		if si < 0 || int(si) >= len(subs) {
			return nil, fmt.Errorf("%w: subscription index %d of %d", errBadAssign, si, len(subs))
		}
		g.MemberSet[i] = sdk.Member{ID: id, InstanceID: at(req.InstanceIds, i), Rack: at(req.Racks, i),
			Topics: subs[si], Owned: owned[i]}
		if ud := at(req.UserData, i); len(ud) > 0 {
			g.MemberSet[i].UserData = ud
		}
	}
	if len(req.Topics) > 0 {
		g.Topics = make([]sdk.Topic, len(req.Topics))
	}
	for i, t := range req.Topics {
		n, err := name(t.Name)
		if err != nil {
			return nil, err
		}
		st := sdk.Topic{Name: n, Partitions: t.Partitions}
		if t.HasRacks {
			st.Racks = make([][]string, len(t.Racks))
			for j, r := range t.Racks {
				st.Racks[j] = r.Racks
			}
		}
		g.Topics[i] = st
	}
	return g, nil
}

func planToPB(p *sdk.Plan) *pluginpb.AssignResponse {
	resp := &pluginpb.AssignResponse{}
	if p == nil || len(p.Assignments) == 0 {
		return resp
	}
	tt := newTopicTable(16)
	size := 0
	for _, tps := range p.Assignments {
		size += len(tps) + 2*countTopicRuns(tps)
	}
	l := lists{lengths: make([]int32, 0, len(p.Assignments)), flat: make([]int32, 0, size)}
	resp.MemberIds = make([]string, 0, len(p.Assignments))
	for id, tps := range p.Assignments {
		resp.MemberIds = append(resp.MemberIds, id)
		l.appendList(tt, tps)
	}
	resp.TopicNames, resp.Lengths, resp.Partitions = tt.names, l.lengths, l.flat
	return resp
}

func planFromPB(resp *pluginpb.AssignResponse) (*sdk.Plan, error) {
	if len(resp.Lengths) != len(resp.MemberIds) {
		return nil, fmt.Errorf("%w: %d lengths for %d members", errBadAssign, len(resp.Lengths), len(resp.MemberIds))
	}
	tps, err := lists{resp.Lengths, resp.Partitions}.decode(len(resp.MemberIds), resp.TopicNames)
	if err != nil {
		return nil, err
	}
	p := &sdk.Plan{Assignments: make(map[string][]sdk.TopicPartition, len(resp.MemberIds))}
	for i, id := range resp.MemberIds {
		if _, dup := p.Assignments[id]; dup {
			return nil, fmt.Errorf("%w: member %q listed twice", errBadAssign, id)
		}
		p.Assignments[id] = tps[i]
	}
	return p, nil
}
