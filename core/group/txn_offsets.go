package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, issue 11). TxnOffsetCommit writes
// the offsets as Kafka does: offset records in a transactional batch of
// the producer (Record.Txn), pending, per group and producer, and
// invisible to OffsetFetch. When the transaction's marker is written to
// the group's __consumer_offsets partition, CompleteTxnOffsets commits
// them (records like any OffsetCommit's) or drops them. A load replays
// the same way (Load.ReplayTxn, Load.ReplayMarker), so pending offsets
// survive a coordinator failover. OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for a partition with a pending offset.

// TxnOffsetCommit handles a TxnOffsetCommit: generation fencing as for
// OffsetCommit when a member is named, then the offsets wait for the
// transaction's end. The reply is immediate.
func (c *Coordinator) TxnOffsetCommit(now time.Time, req *kmsg.TxnOffsetCommitRequest, w Waiter) Output {
	var out Output
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	code := int16(0)
	if req.Group == "" {
		code = kerr.InvalidGroupID.Code
	} else if code = c.coordinatorError(req.Group); code == 0 && (req.MemberID != "" || req.Generation >= 0) && c.groups[req.Group] != nil {
		code = c.checkCommit(now, &kmsg.OffsetCommitRequest{Version: 8, Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID})
	}
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		info, known := c.cfg.Topics.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case code != 0:
				sp.ErrorCode = code
			case !known || rp.Partition < 0 || rp.Partition >= info.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > c.cfg.MaxMetadataBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				o := offset{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, commitMs: now.UnixMilli()}
				if req.Version < 2 {
					o.leaderEpoch = -1
				}
				if rp.Metadata != nil {
					o.metadata = *rp.Metadata
				}
				r := c.offsetRecord(req.Group, tp{rt.Topic, rp.Partition}, o)
				r.Txn, r.ProducerID, r.ProducerEpoch = true, req.ProducerID, req.ProducerEpoch
				out.Records = append(out.Records, r) // pending once applied
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	out.Replies = append(out.Replies, Reply{To: w, Resp: resp, Durable: true})
	return out
}

// replayTxnOffset records a transactional offset record of producer pid
// as pending.
func (c *Coordinator) replayTxnOffset(pid int64, key, value []byte) error {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil || (k.Version != 0 && k.Version != 1) {
		return fmt.Errorf("%w: transactional offset key: %v", ErrCorrupt, err)
	}
	if value == nil {
		return nil
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: transactional offset value: %v", ErrCorrupt, err)
	}
	c.pendingTxn(k.Group, pid)[tp{k.Topic, k.Partition}] = offset{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestamp}
	return nil
}

// ReplayTxn replays a record of a transactional batch of producer pid: a
// transactional offset commit, pending until ReplayMarker.
func (l *Load) ReplayTxn(pid int64, key, value []byte) error {
	l.records++
	return l.into.replayTxnOffset(pid, key, value)
}

// ReplayMarker replays a transaction marker of producer pid: its pending
// offsets in the partition become committed or are dropped.
func (l *Load) ReplayMarker(now time.Time, pid int64, commit bool) {
	out := l.into.CompleteTxnOffsets(now, pid, l.partition, commit)
	for _, r := range out.Records {
		_ = l.into.Replay(now, r.Key, r.Value)
	}
}

// adoptTxnOffsets takes the pending offsets a load found for its
// partition's groups.
func (c *Coordinator) adoptTxnOffsets(l *Load) {
	for g, byPID := range l.into.txnOffsets {
		if c.partitionFor(g) != l.partition {
			continue
		}
		for pid, m := range byPID {
			for t, o := range m {
				c.pendingTxn(g, pid)[t] = o
			}
		}
	}
}

// dropTxnOffsets forgets the pending offsets of partition's groups
// (Unload).
func (c *Coordinator) dropTxnOffsets(partition int32) {
	for g := range c.txnOffsets {
		if c.partitionFor(g) == partition {
			delete(c.txnOffsets, g)
		}
	}
}

func (c *Coordinator) pendingTxn(group string, pid int64) map[tp]offset {
	if c.txnOffsets == nil {
		c.txnOffsets = map[string]map[int64]map[tp]offset{}
	}
	byPID := c.txnOffsets[group]
	if byPID == nil {
		byPID = map[int64]map[tp]offset{}
		c.txnOffsets[group] = byPID
	}
	m := byPID[pid]
	if m == nil {
		m = map[tp]offset{}
		byPID[pid] = m
	}
	return m
}

// CompleteTxnOffsets ends producer pid's transactional offsets of the
// groups in __consumer_offsets partition: committed (their records are in
// the Output) or dropped.
func (c *Coordinator) CompleteTxnOffsets(now time.Time, pid int64, partition int32, commit bool) Output {
	var out Output
	for g, byPID := range c.txnOffsets {
		if c.partitionFor(g) != partition {
			continue
		}
		pending, ok := byPID[pid]
		if !ok {
			continue
		}
		delete(byPID, pid)
		if len(byPID) == 0 {
			delete(c.txnOffsets, g)
		}
		if !commit {
			continue
		}
		for _, t := range sortedTPs(pending) {
			o := pending[t]
			o.commitMs = now.UnixMilli()
			out.Records = append(out.Records, c.offsetRecord(g, t, o))
		}
		if c.groups[g] == nil {
			c.groups[g] = newClassicGroup(g, now)
		}
	}
	return out
}

// HasPendingTxnOffsets says a transaction holds offsets of group.
func (c *Coordinator) HasPendingTxnOffsets(group string) bool { return len(c.txnOffsets[group]) > 0 }

func (c *Coordinator) unstable(group, topic string, partition int32) bool {
	for _, m := range c.txnOffsets[group] {
		if _, ok := m[tp{topic, partition}]; ok {
			return true
		}
	}
	return false
}

// markUnstable applies RequireStable to an OffsetFetch answer.
func (c *Coordinator) markUnstable(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	if !req.RequireStable || len(c.txnOffsets) == 0 {
		return
	}
	for i := range resp.Topics {
		st := &resp.Topics[i]
		for j := range st.Partitions {
			if sp := &st.Partitions[j]; c.unstable(req.Group, st.Topic, sp.Partition) {
				sp.ErrorCode, sp.Offset = kerr.UnstableOffsetCommit.Code, -1
			}
		}
	}
	for g := range resp.Groups {
		rg := &resp.Groups[g]
		for i := range rg.Topics {
			st := &rg.Topics[i]
			for j := range st.Partitions {
				if sp := &st.Partitions[j]; c.unstable(rg.Group, st.Topic, sp.Partition) {
					sp.ErrorCode, sp.Offset = kerr.UnstableOffsetCommit.Code, -1
				}
			}
		}
	}
}
