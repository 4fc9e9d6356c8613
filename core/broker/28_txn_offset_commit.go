package broker

// TxnOffsetCommit v0-v3 stores a transaction's consumed offsets with the
// group coordinator, pending until the transaction ends (core/group
// txn_offsets.go). Version notes: v2 adds the leader epoch; v3 (flexible)
// the generation, member and instance IDs for fencing (KIP-447).

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/wire"
)

func handleTxnOffsetCommit(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	if code := b.coordinatorReady(ctx); code != 0 {
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return reply(resp)
	}
	w := newWaiter()
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output { return c.TxnOffsetCommit(now, r, w) })
	return await(ctx, w)
}

// completeTxnOffsets ends producer pid's pending transactional offsets in
// __consumer_offsets partition i: committed offsets are written like an
// OffsetCommit's, aborted ones dropped.
func (b *Broker) completeTxnOffsets(pid int64, i int32, commit bool) {
	b.groups.step(func(c *group.Coordinator, now time.Time) group.Output {
		return c.CompleteTxnOffsets(now, pid, i, commit)
	})
}

// producerRuns splits records into runs of the same producer (or of no
// producer), keeping their order.
func producerRuns(recs []group.Record) [][]group.Record {
	var runs [][]group.Record
	for i, r := range recs {
		if i > 0 {
			prev := recs[i-1]
			if prev.Txn == r.Txn && prev.ProducerID == r.ProducerID && prev.ProducerEpoch == r.ProducerEpoch {
				runs[len(runs)-1] = append(runs[len(runs)-1], r)
				continue
			}
		}
		runs = append(runs, []group.Record{r})
	}
	return runs
}

// txnRecordBatch encodes the transactional offset commits of one
// producer as its transactional batch (no sequence: the log checks the
// epoch only), as Kafka's group coordinator writes them.
func txnRecordBatch(recs []group.Record, ts int64) []byte {
	krs := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		krs[i] = kmsg.Record{Key: r.Key, Value: r.Value}
	}
	b := recordBatchRecs(krs, ts)
	// Producer fields and the transactional bit, then the CRC again:
	// producerId at 43, producerEpoch at 51, attributes at 21.
	binary.BigEndian.PutUint64(b[43:], uint64(recs[0].ProducerID))
	binary.BigEndian.PutUint16(b[51:], uint16(recs[0].ProducerEpoch))
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10)
	record.SetCRC(b)
	return b
}

// markerType returns the control type of a control record's key.
func markerType(key []byte) (int16, bool) {
	var k kmsg.ControlRecordKey
	if err := k.ReadFrom(key); err != nil {
		return -1, false
	}
	return int16(k.Type), true
}
