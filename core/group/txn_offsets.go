package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, issue 11). TxnOffsetCommit keeps
// the offsets pending, per group and producer, invisible to OffsetFetch;
// when the transaction's marker is written to the group's
// __consumer_offsets partition, CompleteTxnOffsets commits them (records
// like any OffsetCommit's) or drops them. OffsetFetch with RequireStable
// answers UNSTABLE_OFFSET_COMMIT for a partition with a pending offset.
//
// Not yet durable: pending offsets live in memory until the marker, so a
// coordinator failover between TxnOffsetCommit and EndTxn loses them.

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
				c.pendingTxn(req.Group, req.ProducerID)[tp{rt.Topic, rp.Partition}] = o
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	out.Replies = append(out.Replies, Reply{To: w, Resp: resp})
	return out
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
