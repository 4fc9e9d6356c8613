package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// ackWait is one appended partition whose produce response waits for the
// high watermark.
type ackWait struct {
	p      *partition
	sp     *kmsg.ProduceResponseTopicPartition
	topic  string
	last   int64 // last offset appended
	epoch  int32 // leader epoch of the append
	minISR int32
}

// awaitAcks waits for every pending partition in turn, within the
// request's timeout, and sets errors on those that fail. It returns an
// error only when the connection closes meanwhile.
func (b *Broker) awaitAcks(ctx context.Context, req *wire.Request, r *kmsg.ProduceRequest, pending []ackWait) error {
	start := time.Now()
	defer func() { req.Parked += time.Since(start) }()
	timeout := time.Duration(max(r.TimeoutMillis, 0)) * time.Millisecond
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	expired := false
	for _, w := range pending {
		err := b.awaitAck(ctx, w, timer.C, &expired)
		if err == context.Canceled || err == context.DeadlineExceeded {
			return err
		}
		if err != nil {
			setProduceError(b, req, r, w.topic, w.sp, err)
		}
	}
	return nil
}

// awaitAck waits for one partition; a nil error means acknowledged.
func (b *Broker) awaitAck(ctx context.Context, w ackWait, timeout <-chan time.Time, expired *bool) error {
	p := w.p
	for {
		ch := p.hwChanged() // before the checks, so no advance is missed
		if !p.isLeader() || p.leaderEpoch.Load() != w.epoch {
			return fmt.Errorf("leadership moved while waiting for replicas: %w", kerr.NotLeaderForPartition)
		}
		if p.highWatermark() > w.last {
			if n := p.isrSize(); int32(n) < w.minISR {
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
