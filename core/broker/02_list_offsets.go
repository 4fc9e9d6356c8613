package broker

// ListOffsets v1-v8 turns timestamps into offsets.
//
// Version notes: v1 answers one offset and its timestamp (v0's list of
// offsets is not served); v2 adds IsolationLevel; v4 CurrentLeaderEpoch
// (KIP-320) and LeaderEpoch in the answer; v6 is flexible; v7 adds
// timestamp -3, the record with the largest timestamp (KIP-734); v8 adds
// -4, the earliest offset still on local storage (KIP-405).
//
// Special timestamps: -2 (earliest) is the log start offset, -4 is the
// same since all data is local, -1 (latest) is the high watermark
// (read_committed: the last stable offset, below the oldest open
// transaction), -3 is the offset of the first record with the largest
// timestamp. A timestamp >= 0 gives the first offset whose record has a
// timestamp at or after it, with that timestamp; when there is none the
// answer is offset -1 and timestamp -1, as in Kafka. Other negative
// timestamps, or -3/-4 below their version, are UNSUPPORTED_VERSION; a
// partition asked for twice is INVALID_REQUEST. Offsets at or past the
// high watermark are never returned.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/wire"
)

// Special ListOffsets timestamps.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
)

func handleListOffsets(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ListOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	snap := b.meta.Load()
	dups := duplicateListPartitions(r)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt, st := &r.Topics[i], &resp.Topics[i]
		st.Topic = rt.Topic
		t := snap.byName[rt.Topic]
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, sp := &rt.Partitions[j], &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			var p *partition
			if t != nil {
				p = t.partition(rp.Partition)
			}
			switch {
			case dups[topicPartition{rt.Topic, rp.Partition}]:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case !listTimestampServed(rp.Timestamp, r.Version):
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !p.IsLeader():
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case r.Version >= 4 && checkLeaderEpoch(p.LeaderEpoch(), rp.CurrentLeaderEpoch) != 0:
				sp.ErrorCode = checkLeaderEpoch(p.LeaderEpoch(), rp.CurrentLeaderEpoch)
			default:
				b.listOffset(p, rp.Timestamp, r.IsolationLevel == 1, sp)
			}
		}
	}
	return reply(resp)
}

type topicPartition struct {
	topic     string
	partition int32
}

// duplicateListPartitions returns the partitions the request names more
// than once (Kafka answers each of them INVALID_REQUEST), nil if none.
func duplicateListPartitions(r *kmsg.ListOffsetsRequest) map[topicPartition]bool {
	seen := make(map[topicPartition]bool)
	var dups map[topicPartition]bool
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := topicPartition{rt.Topic, rp.Partition}
			if seen[tp] {
				if dups == nil {
					dups = make(map[topicPartition]bool)
				}
				dups[tp] = true
			}
			seen[tp] = true
		}
	}
	return dups
}

// listTimestampServed reports whether timestamp is a point in time or a
// special value the request's version knows.
func listTimestampServed(ts int64, version int16) bool {
	switch {
	case ts >= 0, ts == listLatest, ts == listEarliest:
		return true
	case ts == listMaxTimestamp:
		return version >= 7
	case ts == listEarliestLocal:
		return version >= 8
	}
	return false
}

// listOffset answers one partition. Offsets at or past the high watermark
// are not visible and are answered as "none" (-1, -1).
func (b *Broker) listOffset(p *partition, ts int64, committed bool, sp *kmsg.ListOffsetsResponseTopicPartition) {
	if p.log.Err() != nil { // its log directory is offline (logdir.go)
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return
	}
	hw := p.HighWatermark()
	sp.LeaderEpoch = p.LeaderEpoch()
	switch ts {
	case listEarliest, listEarliestLocal:
		// The log start offset, as in Kafka: a replica resolving an
		// out-of-range fetch resumes there, and retention never moves it
		// past the high watermark.
		sp.Offset = p.log.StartOffset()
		return
	case listLatest:
		sp.Offset = hw
		if committed { // read_committed: the last stable offset (issue 11)
			sp.Offset = p.log.LastStableOffset(hw)
		}
		return
	}
	var off, at int64 // the offset found and its timestamp
	var err error
	if ts == listMaxTimestamp {
		at, off = p.log.MaxTimestamp()
	} else {
		off, at, err = p.log.OffsetForTime(ts)
	}
	switch {
	case errors.Is(err, log.ErrClosed):
		sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, record.ErrCorrupt):
		b.logger.Error("broker: list offsets", "partition", p.String(), "timestamp", ts, "err", err)
		sp.ErrorCode = kerr.CorruptMessage.Code
	case err != nil:
		b.logger.Error("broker: list offsets", "partition", p.String(), "timestamp", ts, "err", err)
		sp.ErrorCode = kerr.KafkaStorageError.Code
	case off >= 0 && off < hw:
		sp.Offset, sp.Timestamp = off, at
	default:
		sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
	}
}
