package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/wire"
)

// The acks=all purgatory. A produce with acks=-1 in cluster mode appends
// on the leader, then its response waits until the partition's high
// watermark passes the last appended offset: every ISR member has the
// batch. Waiters sleep on the partition's hwChanged channel (closed by
// every HW advance and every role change), so the purgatory is keyed by
// partition and woken by HW advances; the request's TimeoutMillis bounds
// the wait (then REQUEST_TIMED_OUT). If the ISR has shrunk below
// min.insync.replicas by the time the offset is committed the answer is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the batch stays in the log); if this
// broker stopped leading at that epoch meanwhile, NOT_LEADER_OR_FOLLOWER.

// ackWait is one appended partition whose produce response waits for its
// fsync (flush.messages=1), for the high watermark (acks=-1), or both.
type ackWait struct {
	p      *partition
	sp     *kmsg.ProduceResponseTopicPartition
	topic  string
	last   int64 // last offset appended
	epoch  int32 // leader epoch of the append
	minISR int32
	// durableAt, if set, is the log.AppendResult.DurableAt the append
	// must reach before anything is acknowledged.
	durableAt int64
	noHW      bool // acks 0 or 1, or the append failed: no high watermark wait
}

// awaitAcks waits for the pending partitions of a produce request: first
// for the fsyncs of those that need one (all of them were written before
// this, so the log.Syncer runs their fsyncs at once), then for the high
// watermark of the acks=-1 ones in turn, within the request's timeout. It
// sets errors on those that fail and returns how many did; the error is
// set only when the connection closes meanwhile.
func (b *Broker) awaitAcks(ctx context.Context, req *wire.Request, r *kmsg.ProduceRequest, pending []ackWait) (failed int, err error) {
	start := time.Now()
	defer func() { req.Parked += time.Since(start) }()
	for i := range pending {
		w := &pending[i]
		if w.durableAt == 0 {
			continue
		}
		if err := w.p.AwaitDurable(w.durableAt); err != nil {
			setProduceError(b, req, r, w.topic, w.sp, err)
			w.noHW = true
			failed++
		}
	}
	timeout := time.Duration(max(r.TimeoutMillis, 0)) * time.Millisecond
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	expired := false
	for _, w := range pending {
		if w.noHW {
			continue
		}
		err := b.awaitAck(ctx, w, timer.C, &expired)
		if err == context.Canceled || err == context.DeadlineExceeded {
			return failed, err
		}
		if err != nil {
			setProduceError(b, req, r, w.topic, w.sp, err)
			failed++
		}
	}
	return failed, nil
}

// awaitAck waits for one partition; a nil error means acknowledged.
func (b *Broker) awaitAck(ctx context.Context, w ackWait, timeout <-chan time.Time, expired *bool) error {
	p := w.p
	for {
		ch := p.HWChanged() // before the checks, so no advance is missed
		if st := p.State(); st.Role != part.Leader || st.View.LeaderEpoch != w.epoch {
			return fmt.Errorf("leadership moved while waiting for replicas: %w", kerr.NotLeaderForPartition)
		}
		if p.HighWatermark() > w.last {
			if n := p.ISRSize(); int32(n) < w.minISR {
				return fmt.Errorf("ISR has %d replicas, min.insync.replicas is %d: %w", n, w.minISR, kerr.NotEnoughReplicasAfterAppend)
			}
			return nil
		}
		if *expired {
			return fmt.Errorf("offset %d not replicated to the ISR in time: %w", w.last, kerr.RequestTimedOut)
		}
		select {
		case <-ch:
		case <-timeout:
			*expired = true
		case <-b.stopCh:
			return fmt.Errorf("broker shutting down: %w", kerr.NotLeaderForPartition)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
