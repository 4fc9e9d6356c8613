package cluster

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/vltava/vltava/plugins/sdk"
)

// brokerEntry is a registration with the revision that created it: a
// broker that went away and came back between two looks has a new one.
type brokerEntry struct {
	info       BrokerInfo
	version    int64         // of the key's last write
	registered int64         // revision of the put that created the key
	session    sdk.SessionID // the registration's session
}

// controllerEntry is /controller as seen; version 0 means absent.
type controllerEntry struct {
	id      int32
	epoch   int64
	version int64
}

// partitionView is one partition's state and assignment.
type partitionView struct {
	state    PartitionState
	replicas []int32
}

// view is the Node's copy of the cluster keys of the store. The watcher
// goroutine is its only writer; readers take a clone.
type view struct {
	rev        int64
	brokers    map[int32]brokerEntry
	topics     map[string]Topic
	parts      map[TopicPartition]PartitionState
	controller controllerEntry
}

func newView() *view {
	return &view{
		brokers: map[int32]brokerEntry{},
		topics:  map[string]Topic{},
		parts:   map[TopicPartition]PartitionState{},
	}
}

// clone copies the maps; values are not modified in place, so sharing
// their slices is safe.
func (v *view) clone() *view {
	return &view{
		rev:        v.rev,
		brokers:    maps.Clone(v.brokers),
		topics:     maps.Clone(v.topics),
		parts:      maps.Clone(v.parts),
		controller: v.controller,
	}
}

// liveness reports a broker's status in this view.
func (v *view) liveness() liveness {
	return func(id int32) brokerStatus {
		b, ok := v.brokers[id]
		switch {
		case !ok:
			return brokerDead
		case b.info.ShuttingDown:
			return brokerShuttingDown
		}
		return brokerLive
	}
}

func (v *view) liveBrokers() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(v.brokers))
	for _, b := range v.brokers {
		out = append(out, b.info)
	}
	slices.SortFunc(out, func(a, b BrokerInfo) int { return int(a.ID - b.ID) })
	return out
}

// partitions joins states with assignments; partitions of unknown
// topics or without an assignment are left out.
func (v *view) partitions() map[TopicPartition]partitionView {
	out := make(map[TopicPartition]partitionView, len(v.parts))
	for tp, st := range v.parts {
		t, ok := v.topics[tp.Topic]
		if !ok || tp.Partition >= t.Partitions {
			continue
		}
		if r := t.Assignment(tp.Partition); r != nil {
			out[tp] = partitionView{state: st, replicas: r}
		}
	}
	return out
}

// change is what an applied batch means to the Applier.
type change struct {
	brokers       bool
	deletedTopics []string
	partitions    map[TopicPartition]bool
	controller    bool
	// topics names the topics whose record was written (for
	// TopicApplier), in no order.
	topics map[string]bool
}

func (c *change) any() bool {
	return c.brokers || c.controller || len(c.deletedTopics) > 0 || len(c.partitions) > 0 || len(c.topics) > 0
}

func (c *change) touchTopic(name string) {
	if c.topics == nil {
		c.topics = map[string]bool{}
	}
	c.topics[name] = true
}

func (c *change) touch(tp TopicPartition) {
	if c.partitions == nil {
		c.partitions = map[TopicPartition]bool{}
	}
	c.partitions[tp] = true
}

// applyEvent folds one watch event into the view. Keys outside the
// cluster prefixes are ignored; undecodable values are logged by the
// caller through the returned error and otherwise ignored.
func (v *view) applyEvent(ev *sdk.WatchEvent, c *change) error {
	if ev.Revision > v.rev {
		v.rev = ev.Revision
	}
	switch {
	case ev.Key == controllerKey:
		c.controller = true
		if ev.Type == sdk.EventDelete {
			v.controller = controllerEntry{}
			return nil
		}
		var rec controllerRecord
		if err := json.Unmarshal(ev.Value, &rec); err != nil {
			return err
		}
		v.controller = controllerEntry{id: rec.ID, epoch: rec.Epoch, version: ev.Version}
	case strings.HasPrefix(ev.Key, brokersPrefix):
		id, ok := parseBrokerKey(ev.Key)
		if !ok {
			return nil
		}
		c.brokers = true
		if ev.Type == sdk.EventDelete {
			delete(v.brokers, id)
			return nil
		}
		info, err := decodeBroker(ev.Value)
		if err != nil {
			return err
		}
		e, existed := v.brokers[id]
		if !existed {
			e.registered = ev.Revision
		}
		e.info, e.version, e.session = info, ev.Version, ev.Session
		v.brokers[id] = e
	case strings.HasPrefix(ev.Key, topicsPrefix):
		return v.applyTopic(ev, c)
	case strings.HasPrefix(ev.Key, partitionsPrefix):
		topic, p, ok := parsePartitionKey(ev.Key)
		if !ok {
			return nil
		}
		tp := TopicPartition{topic, p}
		if ev.Type == sdk.EventDelete {
			delete(v.parts, tp)
			return nil
		}
		st, err := decodePartition(ev.Value, ev.Version)
		if err != nil {
			return err
		}
		v.parts[tp] = st
		c.touch(tp)
	}
	return nil
}

func (v *view) applyTopic(ev *sdk.WatchEvent, c *change) error {
	name := strings.TrimPrefix(ev.Key, topicsPrefix)
	old, existed := v.topics[name]
	if ev.Type == sdk.EventDelete {
		delete(v.topics, name)
		if existed {
			c.deletedTopics = append(c.deletedTopics, name)
		}
		return nil
	}
	t, err := decodeTopic(name, ev.Value, ev.Version)
	if err != nil {
		return err
	}
	v.topics[name] = t
	c.touchTopic(name)
	if existed && old.ID != t.ID {
		c.deletedTopics = append(c.deletedTopics, name) // replaced: a new topic
		existed = false
	}
	for p := int32(0); p < t.Partitions; p++ {
		if !existed || p >= old.Partitions || !slices.Equal(old.Assignment(p), t.Assignment(p)) {
			c.touch(TopicPartition{name, p})
		}
	}
	return nil
}

// diff reports what differs between an old view and a fresh listing, as
// the events between them would have.
func diff(old, cur *view) change {
	var c change
	if !maps.EqualFunc(old.brokers, cur.brokers, func(a, b brokerEntry) bool { return a.info.Equal(b.info) }) {
		c.brokers = true
	}
	if old.controller != cur.controller {
		c.controller = true
	}
	for name, ot := range old.topics {
		if nt, ok := cur.topics[name]; !ok || nt.ID != ot.ID {
			c.deletedTopics = append(c.deletedTopics, name)
		}
	}
	for name, nt := range cur.topics {
		if ot, ok := old.topics[name]; !ok || ot.Version != nt.Version {
			c.touchTopic(name)
		}
	}
	for tp, st := range cur.parts {
		ot, oldTopic := old.topics[tp.Topic]
		nt := cur.topics[tp.Topic]
		os, had := old.parts[tp]
		if !had || os.Version != st.Version || !oldTopic || ot.ID != nt.ID ||
			!slices.Equal(ot.Assignment(tp.Partition), nt.Assignment(tp.Partition)) {
			c.touch(tp)
		}
	}
	slices.Sort(c.deletedTopics)
	return c
}
