package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Key versions of Vltava's own KIP-848 records in __consumer_offsets
// (kmsg has no schemas for Kafka's ConsumerGroup* records). They sit far
// above Kafka's key versions so the two can never be confused; doc.go has
// the byte layouts.
const (
	keyConsumerGroup  = 1001 // group epoch, assignment epoch, assignor, subscribed topics
	keyConsumerMember = 1002 // a member's subscription and identity
	keyConsumerTarget = 1003 // a member's target assignment
	keyConsumerCur    = 1004 // a member's epochs and current assignment

	valueConsumerV0 = 0 // the only value version so far
)

func isConsumerKey(v int16) bool { return v >= keyConsumerGroup && v <= keyConsumerCur }

func consumerGroupKey(group string) []byte {
	return kbin.AppendString(kbin.AppendInt16(nil, keyConsumerGroup), group)
}

func consumerMemberKey(version int16, group, member string) []byte {
	return kbin.AppendString(kbin.AppendString(kbin.AppendInt16(nil, version), group), member)
}

// appendParts writes partitions as [topic_id uuid, partitions [int32]],
// sorted.
func appendParts(dst []byte, ps map[tpid]bool) []byte {
	ts := assignmentTopics(ps)
	dst = kbin.AppendArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = kbin.AppendUuid(dst, t.TopicID)
		dst = kbin.AppendArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
	}
	return dst
}

func readParts(r *kbin.Reader) map[tpid]bool {
	ps := map[tpid]bool{}
	for i, n := int32(0), r.ArrayLen(); i < n && r.Ok(); i++ {
		id := r.Uuid()
		for j, m := int32(0), r.ArrayLen(); j < m && r.Ok(); j++ {
			ps[tpid{id, r.Int32()}] = true
		}
	}
	return ps
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendString(dst, s)
	}
	return dst
}

func readStrings(r *kbin.Reader) []string {
	var ss []string
	for i, n := int32(0), r.ArrayLen(); i < n && r.Ok(); i++ {
		ss = append(ss, r.String())
	}
	return ss
}

// consumerRecords renders a KIP-848 group's whole state as records: the
// group record first, then each member's three records, by member ID.
func (c *Coordinator) consumerRecords(g *group) []Record {
	cg, part := g.consumer, c.partitionFor(g.id)
	v := kbin.AppendInt16(nil, valueConsumerV0)
	v = kbin.AppendInt32(v, cg.epoch)
	v = kbin.AppendInt32(v, cg.assignmentEpoch)
	v = kbin.AppendString(v, cg.assignor)
	names := sortedKeys(cg.subMeta)
	v = kbin.AppendArrayLen(v, len(names))
	for _, n := range names {
		v = kbin.AppendInt32(kbin.AppendString(v, n), cg.subMeta[n])
	}
	out := []Record{{Partition: part, Key: consumerGroupKey(g.id), Value: v}}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		mv := kbin.AppendInt16(nil, valueConsumerV0)
		for _, s := range []string{m.instanceID, m.rack, m.clientID, m.clientHost} {
			mv = kbin.AppendString(mv, s)
		}
		mv = kbin.AppendInt32(mv, int32(m.rebalanceTimeout.Milliseconds()))
		mv = appendStrings(mv, m.names)
		mv = kbin.AppendString(kbin.AppendString(mv, m.regex), m.assignorPref)
		tv := appendParts(kbin.AppendInt16(nil, valueConsumerV0), cg.target[id])
		cv := kbin.AppendInt16(nil, valueConsumerV0)
		cv = kbin.AppendInt32(kbin.AppendInt32(cv, m.epoch), m.prevEpoch)
		cv = kbin.AppendBool(cv, m.left)
		cv = appendParts(appendParts(cv, m.assigned), m.revoking)
		out = append(out,
			Record{Partition: part, Key: consumerMemberKey(keyConsumerMember, g.id, id), Value: mv},
			Record{Partition: part, Key: consumerMemberKey(keyConsumerTarget, g.id, id), Value: tv},
			Record{Partition: part, Key: consumerMemberKey(keyConsumerCur, g.id, id), Value: cv})
	}
	return out
}

// persistConsumer adds to out the records of a KIP-848 group that differ
// from what is already in the log (cg.persisted), and tombstones for
// members that are gone. cg.persisted itself changes only in Apply, once
// the records are appended, so a failed append is retried by the next
// step.
func (c *Coordinator) persistConsumer(g *group, out *Output) {
	cg := g.consumer
	want := c.consumerRecords(g)
	keep := map[string]bool{}
	for _, r := range want {
		keep[string(r.Key)] = true
		if old, ok := cg.persisted[string(r.Key)]; !ok || !bytes.Equal(old, r.Value) {
			out.Records = append(out.Records, r)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cg.persisted)) {
		if !keep[k] {
			out.Records = append(out.Records, Record{Partition: c.partitionFor(g.id), Key: []byte(k)})
		}
	}
}

// tombstoneConsumer adds tombstones for every KIP-848 record of g in the
// log: members' records first, the group record last.
func (c *Coordinator) tombstoneConsumer(g *group, cg *consumer, out *Output) {
	gk := string(consumerGroupKey(g.id))
	for _, k := range slices.Sorted(maps.Keys(cg.persisted)) {
		if k != gk {
			out.Records = append(out.Records, Record{Partition: c.partitionFor(g.id), Key: []byte(k)})
		}
	}
	if _, ok := cg.persisted[gk]; ok {
		out.Records = append(out.Records, Record{Partition: c.partitionFor(g.id), Key: []byte(gk)})
	}
}

// applyConsumer notes that a KIP-848 record is in the log.
func (c *Coordinator) applyConsumer(key, value []byte) {
	r := kbin.Reader{Src: key[2:]}
	g := c.groups[r.String()]
	if !r.Ok() || g == nil || g.consumer == nil {
		return
	}
	if value == nil {
		delete(g.consumer.persisted, string(key))
		return
	}
	g.consumer.persisted[string(key)] = value
}

// replayConsumer applies one KIP-848 record read from the log. The group
// turns KIP-848 (keeping its offsets) on its first such record; members
// loaded get a fresh session, so a member that keeps heartbeating keeps
// its epoch and assignment across a restart.
func (c *Coordinator) replayConsumer(now time.Time, version int16, key, value []byte) error {
	kr := kbin.Reader{Src: key[2:]}
	id := kr.String()
	var member string
	if version != keyConsumerGroup {
		member = kr.String()
	}
	if err := complete(&kr); err != nil {
		return fmt.Errorf("%w: KIP-848 key %d: %v", ErrCorrupt, version, err)
	}
	g := c.groups[id]
	if value == nil {
		if g == nil || g.consumer == nil {
			return nil
		}
		cg := g.consumer
		delete(cg.persisted, string(key))
		c.replayConsumerTombstone(now, g, version, member)
		return nil
	}
	if len(value) < 2 || int16(binary.BigEndian.Uint16(value)) != valueConsumerV0 {
		return fmt.Errorf("%w: KIP-848 record %d: unknown value version", ErrCorrupt, version)
	}
	r := kbin.Reader{Src: value[2:]}
	if g == nil {
		g = newClassicGroup(id, now)
		c.groups[id] = g
	}
	prev := g.consumer
	if g.consumer == nil {
		g.classic, g.consumer = nil, newConsumer(now)
	}
	cg := g.consumer
	if version == keyConsumerGroup {
		cg.epoch, cg.assignmentEpoch, cg.assignor = r.Int32(), r.Int32(), r.String()
		meta := map[string]int32{}
		for i, n := int32(0), r.ArrayLen(); i < n && r.Ok(); i++ {
			meta[r.String()] = r.Int32()
		}
		cg.subMeta = meta
	} else {
		c.replayConsumerMember(now, cg, version, member, &r)
	}
	if err := complete(&r); err != nil {
		if prev == nil {
			g.consumer = nil
			g.classic = newClassic(now)
		}
		return fmt.Errorf("%w: KIP-848 record %d of %s: %v", ErrCorrupt, version, id, err)
	}
	cg.persisted[string(key)] = value
	return nil
}

func (c *Coordinator) replayConsumerMember(now time.Time, cg *consumer, version int16, id string, r *kbin.Reader) {
	m := cg.members[id]
	if m == nil {
		m = &cmember{id: id, assigned: map[tpid]bool{}, revoking: map[tpid]bool{}, subscribed: map[string]bool{}}
		m.sessionDeadline = now.Add(c.cfg.ConsumerSessionTimeout)
		cg.members[id] = m
	}
	switch version {
	case keyConsumerMember:
		m.instanceID, m.rack, m.clientID, m.clientHost = r.String(), r.String(), r.String(), r.String()
		m.rebalanceTimeout = time.Duration(r.Int32()) * time.Millisecond
		m.names = readStrings(r)
		m.regex, m.assignorPref = r.String(), r.String()
		m.re = nil
		if m.regex != "" {
			m.re, _ = compileRegex(m.regex) // an invalid one subscribes to nothing more
		}
		m.resolve(c.cfg.Topics)
		if m.instanceID != "" {
			cg.static[m.instanceID] = id
		}
	case keyConsumerTarget:
		cg.target[id] = readParts(r)
	case keyConsumerCur:
		m.epoch, m.prevEpoch, m.left = r.Int32(), r.Int32(), r.Bool()
		m.assigned, m.revoking = readParts(r), readParts(r)
		m.revokeDeadline = time.Time{}
		if len(m.revoking) > 0 {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
}

func (c *Coordinator) replayConsumerTombstone(now time.Time, g *group, version int16, member string) {
	cg := g.consumer
	switch version {
	case keyConsumerGroup:
		if len(g.offsets) == 0 {
			delete(c.groups, g.id)
			return
		}
		g.consumer, g.classic = nil, newClassic(now)
	case keyConsumerMember, keyConsumerCur:
		if m := cg.members[member]; m != nil {
			delete(cg.members, member)
			if m.instanceID != "" && cg.static[m.instanceID] == member {
				delete(cg.static, m.instanceID)
			}
			if len(cg.members) == 0 {
				cg.emptySince = now
			}
		}
	case keyConsumerTarget:
		delete(cg.target, member)
	}
}

// complete reports a record that ran out early or has bytes left over.
func complete(r *kbin.Reader) error {
	if err := r.Complete(); err != nil {
		return err
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%d bytes left over", len(r.Src))
	}
	return nil
}
