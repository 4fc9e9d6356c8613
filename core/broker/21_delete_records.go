package broker

// DeleteRecords v0-v2 moves partitions' log start offsets forward
// (KIP-107).
//
// Version notes: v1 is v0 (throttle behaviour only); v2 is flexible.
//
// Per partition: an unknown topic or partition is
// UNKNOWN_TOPIC_OR_PARTITION; a topic whose cleanup.policy does not
// include delete is POLICY_VIOLATION, as in Kafka; offset -1 means the
// high watermark; any other offset below 0 or above the high watermark is
// OFFSET_OUT_OF_RANGE. An offset at or below the current log start offset
// changes nothing. The answer is the new low watermark (log start offset).
// TimeoutMillis is not used: the change is local and done when the log
// returns.
//
// The high watermark does not move (the log start never passes it), so
// fetches waiting at it keep waiting; a fetch below the new start gets
// OFFSET_OUT_OF_RANGE from then on.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/wire"
)

func handleDeleteRecords(b *Broker, _ context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	snap := b.meta.Load()
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt, st := &r.Topics[i], &resp.Topics[i]
		st.Topic = rt.Topic
		t := snap.byName[rt.Topic]
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, sp := &rt.Partitions[j], &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			var p *partition
			if t != nil {
				p = t.partition(rp.Partition)
			}
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !p.IsLeader():
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case !p.Config().Deletes():
				sp.ErrorCode = kerr.PolicyViolation.Code
			default:
				sp.LowWatermark, sp.ErrorCode = b.deleteRecords(p, rp.Offset)
			}
		}
	}
	return reply(resp)
}

// deleteRecords moves p's log start to offset (-1: the high watermark) and
// returns the new log start offset or an error code.
func (b *Broker) deleteRecords(p *partition, offset int64) (int64, int16) {
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		b.logger.Debug("broker: delete records out of range", "partition", p.String(), "offset", offset, "high_watermark", hw)
		return -1, kerr.OffsetOutOfRange.Code
	}
	start, err := p.log.DeleteRecordsBefore(offset)
	switch {
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return -1, kerr.OffsetOutOfRange.Code
	case errors.Is(err, log.ErrClosed):
		return -1, kerr.UnknownTopicOrPartition.Code
	case err != nil:
		b.logger.Error("broker: delete records", "partition", p.String(), "offset", offset, "err", err)
		return -1, kerr.KafkaStorageError.Code
	}
	b.logger.Debug("broker: deleted records", "partition", p.String(), "log_start", start)
	return start, 0
}
