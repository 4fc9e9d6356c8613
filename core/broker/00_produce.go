package broker

// Produce v3-v11 appends record batches.
//
// Version notes: v3 is the first with RecordBatch v2 only and a
// TransactionalID; v5 adds LogStartOffset to the response; v7 is the first
// that may carry zstd batches (KIP-110); v8 adds per-partition error
// messages (KIP-467); v9 is flexible (KIP-482); v10 and v11 add tagged
// leader hints for NOT_LEADER_OR_FOLLOWER (KIP-951): the partition's
// CurrentLeader and the leader's endpoint in Brokers (leaderhint.go).
//
// Each partition is answered on its own, in request order: one bad batch
// does not affect the other partitions of the request. Per partition:
//
//   - an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (Produce
//     does not auto-create topics; Metadata does);
//   - the records must be exactly one RecordBatch v2: none, more than one,
//     or an older magic is INVALID_RECORD, as Kafka's request validation
//     says; zstd below v7 is UNSUPPORTED_COMPRESSION_TYPE;
//   - record.Validate checks the batch with the topic's max.message.bytes
//     (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, ...), and keys
//     on compacted topics;
//   - a transactional batch must belong to the producer's ongoing
//     transaction, with this partition added to it (KIP-890 part 1,
//     checked with the local transaction coordinator, txns.go), else
//     INVALID_TXN_STATE (COORDINATOR_LOAD_IN_PROGRESS while the local
//     coordinator loads); when the coordinator of the transactional ID is
//     another broker the batch is accepted unchecked (not yet verified
//     across brokers);
//   - idempotent batches go through the log's sequence checks:
//     OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, and a
//     duplicate of one of the producer's last five batches is answered
//     with its original base offset and no error.
//
// Acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every
// partition). With flush.messages=1 no answer (whatever acks) goes out
// before the batch is fsynced: every partition of the request is written
// first, then the request waits for their fsyncs together (acks.go,
// log.Syncer), so one request costs about one fsync, not one per
// partition. With acks=-1 the answer waits (up to TimeoutMillis) until
// the high watermark passes the batch (acks.go); with the leader alone in
// the ISR, as on a single node, that is as soon as the append returns.
// With acks=0 nothing is written back; if any partition failed
// the connection is closed instead, as Kafka does, so the producer
// refreshes its metadata.
//
// Validation happens before and outside the log's lock; the hot path does
// no per-record work beyond record.Validate's walk and allocates only the
// response.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/txn"
	"github.com/vltava/vltava/core/wire"
)

// magicOffset is the position of the magic byte in a record batch.
const magicOffset = 16

func handleProduce(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	acksOK := r.Acks == -1 || r.Acks == 0 || r.Acks == 1
	now := time.Now()
	snap := b.meta.Load()
	failed := 0
	var pending []ackWait
	var hints hintEndpoints // KIP-951 (leaderhint.go)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt, st := &r.Topics[i], &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t := snap.byName[rt.Topic]
		for j := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rt.Partitions[j].Partition
			sp.BaseOffset = -1
			var err error
			if !acksOK {
				err = fmt.Errorf("acks %d: want -1, 0 or 1: %w", r.Acks, kerr.InvalidRequiredAcks)
			} else {
				var w ackWait
				w, err = b.produceTo(t, r, rt.Partitions[j].Records, sp, now)
				if err == nil && w.p != nil {
					w.topic = rt.Topic
					pending = append(pending, w)
				}
			}
			if err != nil {
				failed++
				setProduceError(b, req, r, rt.Topic, sp, err)
				if sp.ErrorCode == kerr.NotLeaderForPartition.Code && r.Version >= 10 && t != nil {
					if h, ok := b.leaderHintFor(t.partition(sp.Partition)); ok {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = h.id, h.epoch
						hints.add(h.endpoint)
					}
				}
			}
		}
	}
	if len(pending) > 0 {
		n, err := b.awaitAcks(ctx, req, r, pending)
		if err != nil {
			return nil, err
		}
		failed += n
	}
	if len(hints) > 0 {
		resp.Brokers = hints.produceBrokers()
	}
	if r.Acks == 0 {
		if failed > 0 {
			return nil, fmt.Errorf("broker: acks=0 produce failed for %d partitions", failed)
		}
		return nil, nil
	}
	return reply(resp)
}

// produceTo validates and appends one partition's records and fills sp.
// Errors carry a *kerr.Error for the client (see produceErrorCode).
//
// In cluster mode only the leader appends (else NOT_LEADER_OR_FOLLOWER);
// with acks=-1 an ISR smaller than min.insync.replicas refuses the write
// before the append (NOT_ENOUGH_REPLICAS), and the returned ackWait says
// what the response must wait for.
func (b *Broker) produceTo(t *topic, r *kmsg.ProduceRequest, records []byte, sp *kmsg.ProduceResponseTopicPartition, now time.Time) (ackWait, error) {
	var p *partition
	if t != nil {
		p = t.partition(sp.Partition)
	}
	if p == nil {
		return ackWait{}, kerr.UnknownTopicOrPartition
	}
	cfg := p.Config()
	var numRecords int32
	// The leader check, the validation and the append run under the
	// partition's leader/ISR lock (held for read): leadership can not move
	// in between, so the batch is written under the epoch that was checked
	// or not at all (issue 9, fault 1).
	// A transactional batch is checked against its transaction (KIP-890
	// part 1, issue 11) under the log's append lock, where markers are
	// appended too, so a batch can not slip in after its transaction's
	// marker. The header is validated by the check before verify runs.
	var verify func() error
	if th, err := record.ParseHeader(records); err == nil && th.Transactional() {
		// txn_verify.go; a remote coordinator is asked here, before the
		// partition's locks are taken.
		verify, err = b.txns.produceCheck(r.TransactionID, th.ProducerID, th.ProducerEpoch, p, txn.TP{Topic: t.name, Partition: sp.Partition})
		if err != nil {
			return ackWait{}, err
		}
	}
	if codec, ok := topicCodec(cfg.CompressionType); ok {
		// compression.type names a codec: validate what the producer
		// sent, then store it re-encoded (checked again below).
		if h, err := record.ParseHeader(records); err == nil && h.Codec() != codec {
			if err := checkProduceFraming(records, r.Version); err != nil {
				return ackWait{}, err
			}
			if _, err := record.Validate(records, record.ValidateOptions{MaxBatchBytes: int(cfg.MaxMessageBytes)}); err != nil {
				return ackWait{}, err
			}
			if records, err = record.Recompress(records, codec, 0); err != nil {
				return ackWait{}, fmt.Errorf("broker: recompressing for compression.type=%s: %w", cfg.CompressionType, err)
			}
		}
	}
	res, epoch, err := p.AppendAsLeaderDeferred(records, now, func(l part.Leading) error {
		if err := checkProduceFraming(records, r.Version); err != nil {
			return err
		}
		vo := record.ValidateOptions{
			MaxBatchBytes: int(cfg.MaxMessageBytes),
			RequireKeys:   slices.Contains(cfg.CleanupPolicy, "compact"),
		}
		if !cfg.LogAppendTime { // KIP-937 bounds CreateTime timestamps
			vo.NowMs, vo.TimestampBeforeMaxMs, vo.TimestampAfterMaxMs = now.UnixMilli(), cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs
		}
		h, err := record.Validate(records, vo)
		if err != nil {
			return err
		}
		numRecords = h.NumRecords
		if r.Acks == -1 && int32(l.ISRSize) < cfg.MinInsyncReplicas {
			return fmt.Errorf("ISR has %d replicas, min.insync.replicas is %d: %w", l.ISRSize, cfg.MinInsyncReplicas, kerr.NotEnoughReplicas)
		}
		if produceHook != nil {
			produceHook(p)
		}
		return nil
	}, verify)
	if err != nil {
		return ackWait{}, err
	}
	if !res.Duplicate {
		p.traffic.in(len(records), numRecords)
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogStartOffset = res.LogStartOffset
	if cfg.LogAppendTime && !res.Duplicate {
		sp.LogAppendTime = res.LogAppendTime
	}
	if r.Acks != -1 && res.DurableAt == 0 {
		return ackWait{}, nil
	}
	return ackWait{p: p, sp: sp, last: res.LastOffset, epoch: epoch, minISR: cfg.MinInsyncReplicas,
		durableAt: res.DurableAt, noHW: r.Acks != -1}, nil
}

// topicCodec maps a topic's compression.type to the codec its batches
// are stored in; ok is false for "producer" (stored as sent).
func topicCodec(compressionType string) (record.Codec, bool) {
	switch compressionType {
	case "uncompressed":
		return record.CodecNone, true
	case "gzip":
		return record.CodecGzip, true
	case "snappy":
		return record.CodecSnappy, true
	case "lz4":
		return record.CodecLZ4, true
	case "zstd":
		return record.CodecZstd, true
	}
	return 0, false
}

// produceHook, when set by a test, runs between produceTo's leader check
// and its append.
var produceHook func(p *partition)

// checkProduceFraming applies Kafka's request-level rules for produce v3+:
// exactly one batch, of magic 2, and zstd only from v7 on.
func checkProduceFraming(records []byte, version int16) error {
	if len(records) == 0 {
		return fmt.Errorf("no record batch: %w", kerr.InvalidRecord)
	}
	if len(records) > magicOffset && records[magicOffset] != 2 {
		return fmt.Errorf("batch magic %d: produce v3+ takes only magic 2: %w", int8(records[magicOffset]), kerr.InvalidRecord)
	}
	h, err := record.ParseHeader(records)
	if err != nil {
		return nil // record.Validate reports it
	}
	if h.Size() < len(records) {
		return fmt.Errorf("%d bytes follow the first batch: produce v3+ takes exactly one batch: %w", len(records)-h.Size(), kerr.InvalidRecord)
	}
	if h.Codec() == record.CodecZstd && version < 7 {
		return fmt.Errorf("zstd batch in produce v%d (v7+ needed): %w", version, kerr.UnsupportedCompressionType)
	}
	return nil
}

// setProduceError records err in sp and logs it: expected outcomes
// (unknown topic, sequence and epoch errors) at debug, bad batches at
// info, storage failures at error.
func setProduceError(b *Broker, req *wire.Request, r *kmsg.ProduceRequest, topic string, sp *kmsg.ProduceResponseTopicPartition, err error) {
	code := produceErrorCode(err)
	sp.ErrorCode = code.Code
	sp.BaseOffset = -1
	if r.Version >= 8 {
		msg := err.Error()
		sp.ErrorMessage = &msg
	}
	attrs := []any{"topic", topic, "partition", sp.Partition, "client", req.ClientID, "code", code.Message, "err", err}
	switch code {
	case kerr.KafkaStorageError:
		b.logger.Error("broker: produce", attrs...)
	case kerr.CorruptMessage, kerr.InvalidRecord, kerr.MessageTooLarge, kerr.UnsupportedCompressionType, kerr.InvalidRequiredAcks:
		b.logger.Info("broker: produce refused", attrs...)
	default:
		b.logger.Debug("broker: produce", attrs...)
	}
}

// produceErrorCode maps an error of produceTo to the Kafka error a client
// sees. Errors from record.Validate and produceTo carry a *kerr.Error;
// log errors are mapped by kind; anything else is a storage failure.
func produceErrorCode(err error) *kerr.Error {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke
	case errors.Is(err, log.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber
	case errors.Is(err, log.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	case errors.Is(err, log.ErrClosed):
		// The topic was deleted while the request was served.
		return kerr.UnknownTopicOrPartition
	case errors.Is(err, record.ErrCorrupt):
		return kerr.CorruptMessage
	}
	return kerr.KafkaStorageError
}
