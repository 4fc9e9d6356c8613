package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// ErrCorrupt marks a __consumer_offsets record that does not decode.
var ErrCorrupt = errors.New("group: corrupt __consumer_offsets record")

// Key versions of __consumer_offsets records (the first int16 of a key).
const (
	keyOffsetCommit    = 1 // 0 and 1: OffsetCommitKey
	keyGroupMetadata   = 2 // GroupMetadataKey
	valueOffsetCommit  = 3 // OffsetCommitValue v3: leader epoch, not flexible
	valueGroupMetadata = 3 // GroupMetadataValue v3: instance IDs, not flexible
)

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyOffsetCommit, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func (c *Coordinator) offsetRecord(group string, t tp, o offset) Record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = valueOffsetCommit
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.offset, o.leaderEpoch, o.metadata, o.commitMs
	if o.expireMs != 0 {
		v.Version, v.ExpireTimestamp = 1, o.expireMs
	}
	return Record{Partition: c.partitionFor(group), Key: offsetKey(group, t.topic, t.partition), Value: v.AppendTo(nil)}
}

func (c *Coordinator) offsetTombstone(group string, t tp) Record {
	return Record{Partition: c.partitionFor(group), Key: offsetKey(group, t.topic, t.partition)}
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyGroupMetadata, Group: group}
	return k.AppendTo(nil)
}

func (c *Coordinator) groupTombstone(group string) Record {
	return Record{Partition: c.partitionFor(group), Key: groupKey(group)}
}

// groupRecord is a classic group's metadata as Kafka stores it.
func (c *Coordinator) groupRecord(g *group, now time.Time) Record {
	cg := g.classic
	v := kmsg.NewGroupMetadataValue()
	v.Version = valueGroupMetadata
	v.ProtocolType, v.Generation = cg.protocolType, cg.generation
	if cg.protocol != "" {
		v.Protocol = &cg.protocol
	}
	if cg.leader != "" {
		v.Leader = &cg.leader
	}
	v.CurrentStateTimestamp = now.UnixMilli()
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			vm.InstanceID = &m.instanceID
		}
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription, _ = m.metadataFor(cg.protocol)
		vm.Assignment = m.assignment
		v.Members = append(v.Members, vm)
	}
	return Record{Partition: c.partitionFor(g.id), Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// Replay applies one record of __consumer_offsets, read in log order,
// to the coordinator's state; it is how the coordinator loads a partition
// at start. now stamps the loaded members' sessions. A record that does
// not decode is skipped with an error wrapping ErrCorrupt.
func (c *Coordinator) Replay(now time.Time, key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(key))
	}
	switch v := int16(binary.BigEndian.Uint16(key)); v {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: offset key: %v", ErrCorrupt, err)
		}
		return c.replayOffset(now, k, value)
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: group key: %v", ErrCorrupt, err)
		}
		return c.replayGroup(now, k.Group, value)
	default:
		if isConsumerKey(v) {
			return c.replayConsumer(now, v, key, value)
		}
		// Other record types (such as Kafka's own KIP-848 records) are
		// not ours to read; skip them.
		return nil
	}
}

// Apply makes appended records visible: committed offsets change only
// once their records are in the log, and a KIP-848 group's records count
// as written (so later steps write only changes).
func (c *Coordinator) Apply(now time.Time, recs []Record) {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	for _, r := range recs {
		if r.Txn {
			_ = c.replayTxnOffset(r.ProducerID, r.Key, r.Value) // pending (txn_offsets.go)
			continue
		}
		if len(r.Key) < 2 {
			continue
		}
		switch v := int16(binary.BigEndian.Uint16(r.Key)); {
		case v == 0 || v == 1:
			_ = c.Replay(now, r.Key, r.Value)
		case isConsumerKey(v):
			c.applyConsumer(r.Key, r.Value)
		}
	}
}

func (c *Coordinator) replayOffset(now time.Time, k kmsg.OffsetCommitKey, value []byte) error {
	t := tp{k.Topic, k.Partition}
	g := c.groups[k.Group]
	if value == nil {
		if g != nil {
			delete(g.offsets, t)
		}
		return nil
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: offset value: %v", ErrCorrupt, err)
	}
	if g == nil {
		g = newClassicGroup(k.Group, now)
		c.groups[k.Group] = g
	}
	o := offset{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestamp}
	if v.Version < 3 {
		o.leaderEpoch = -1
	}
	if v.Version == 1 && v.ExpireTimestamp > 0 {
		o.expireMs = v.ExpireTimestamp
	}
	g.offsets[t] = o
	return nil
}

func (c *Coordinator) replayGroup(now time.Time, id string, value []byte) error {
	g := c.groups[id]
	if value == nil {
		if g != nil && g.consumer != nil {
			return nil // the classic state was replaced by KIP-848 records
		}
		if g != nil && len(g.offsets) == 0 {
			delete(c.groups, id)
		} else if g != nil {
			g.consumer, g.classic = nil, newClassic(now)
		}
		return nil
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: group value: %v", ErrCorrupt, err)
	}
	if g == nil {
		g = newClassicGroup(id, now)
		c.groups[id] = g
	}
	cg := newClassic(now)
	g.consumer, g.classic = nil, cg
	cg.protocolType, cg.generation = v.ProtocolType, v.Generation
	if v.Protocol != nil {
		cg.protocol = *v.Protocol
	}
	if v.Leader != nil {
		cg.leader = *v.Leader
	}
	if v.CurrentStateTimestamp > 0 {
		cg.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		cg.seq++
		m := &member{
			id: vm.MemberID, clientID: vm.ClientID, clientHost: vm.ClientHost, seq: cg.seq,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			protocolType:     v.ProtocolType,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: cg.protocol, Metadata: vm.Subscription}},
			assignment:       vm.Assignment,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		if vm.InstanceID != nil && *vm.InstanceID != "" {
			m.instanceID = *vm.InstanceID
			cg.static[m.instanceID] = m.id
		}
		cg.members[m.id] = m
	}
	if len(cg.members) > 0 {
		cg.state = StateStable
	}
	return nil
}
