package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/txn"
)

// The coordinator operations behind InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn (txns.go describes the host). Each takes the
// ID's busy flag for its whole read-persist-install sequence, so the
// records of one ID are appended in the order its state changes; a second
// request meanwhile gets CONCURRENT_TRANSACTIONS, which clients retry.

// begin makes this broker ready to coordinate id and marks it busy. It
// returns the partition and current state, or an error code.
func (h *txnHost) begin(ctx context.Context, id string) (*partition, *txn.Txn, int16) {
	if err := h.ensureTopic(ctx); err != nil {
		h.b.logger.Warn("broker: transaction coordinator not available", "err", err)
		return nil, nil, kerr.CoordinatorNotAvailable.Code
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, code := h.coordinatorLocked(id)
	if code != 0 {
		return nil, nil, code
	}
	if h.busy[id] {
		return nil, nil, kerr.ConcurrentTransactions.Code
	}
	h.busy[id] = true
	return p, h.txns[id], 0
}

func (h *txnHost) done(id string) {
	h.mu.Lock()
	delete(h.busy, id)
	h.mu.Unlock()
}

// persistCode maps a failed state append to the code the client sees.
func persistCode(err error) int16 {
	if errors.Is(err, part.ErrNotLeader) {
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// initProducer is InitProducerId with a transactional ID.
func (h *txnHost) initProducer(ctx context.Context, id string, timeoutMs int32, reqPID int64, reqEpoch int16) (int64, int16, int16) {
	for range 3 {
		p, cur, code := h.begin(ctx, id)
		if code != 0 {
			return -1, -1, code
		}
		next, again, code, err := txn.Init(cur, id, timeoutMs, h.b.cfg.TransactionMaxTimeoutMs, reqPID, reqEpoch, time.Now().UnixMilli(),
			func() (int64, error) { return h.b.allocateProducerID(ctx) })
		if err != nil {
			h.done(id)
			h.b.logger.Warn("broker: init producer id", "transactional_id", id, "err", err)
			return -1, -1, producerIDErrorCode(err)
		}
		if code != 0 {
			h.done(id)
			return -1, -1, code
		}
		if err := h.update(p, cur, next); err != nil {
			h.done(id)
			return -1, -1, persistCode(err)
		}
		if !again {
			h.done(id)
			return next.ProducerID, next.Epoch, 0
		}
		// The previous instance's open transaction: abort it under the
		// bumped epoch (fencing that instance), then bump again.
		h.b.logger.Info("broker: aborting the open transaction of a previous producer instance", "transactional_id", id, "producer_id", next.ProducerID, "epoch", next.Epoch)
		if !h.finish(next) {
			return -1, -1, kerr.ConcurrentTransactions.Code
		}
		reqPID, reqEpoch = -1, -1
	}
	return -1, -1, kerr.ConcurrentTransactions.Code
}

// add is AddPartitionsToTxn and AddOffsetsToTxn.
func (h *txnHost) add(ctx context.Context, id string, pid int64, epoch int16, parts []txn.TP) int16 {
	p, cur, code := h.begin(ctx, id)
	if code != 0 {
		return code
	}
	defer h.done(id)
	next, code := txn.Add(cur, pid, epoch, parts, time.Now().UnixMilli())
	if next == nil {
		return code
	}
	if err := h.update(p, cur, next); err != nil {
		return persistCode(err)
	}
	return 0
}

// verifyOnly is AddPartitionsToTxn v4+ with VerifyOnly: the code of
// each of tps (txn.Verify), without changing anything. It never creates
// __transaction_state and does not wait for a busy ID: a verification
// reads the state last installed.
func (h *txnHost) verifyOnly(id string, pid int64, epoch int16, tps []txn.TP) []int16 {
	h.mu.Lock()
	_, code := h.coordinatorLocked(id)
	cur := h.txns[id]
	h.mu.Unlock()
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		codes[i] = code
		if code == 0 {
			codes[i] = txn.Verify(cur, pid, epoch, tp)
		}
	}
	return codes
}

// end is EndTxn: it persists Prepare*, writes the markers and persists
// Complete* before answering. Once Prepare* is durable the outcome is
// decided: should the markers fail here, the coordinator that loads the
// partition next finishes them. tv2 (EndTxn v5+) bumps the epoch; the
// producer ID and epoch the client continues with come back.
func (h *txnHost) end(ctx context.Context, id string, pid int64, epoch int16, commit, tv2 bool) (int16, int64, int16) {
	p, cur, code := h.begin(ctx, id)
	if code != 0 {
		return code, -1, -1
	}
	next, code, err := txn.End(cur, pid, epoch, commit, tv2, time.Now().UnixMilli(),
		func() (int64, error) { return h.b.allocateProducerID(ctx) })
	if err != nil {
		h.done(id)
		h.b.logger.Warn("broker: end transaction", "transactional_id", id, "err", err)
		return producerIDErrorCode(err), -1, -1
	}
	if next == nil {
		h.done(id)
		if code != 0 {
			return code, -1, -1
		}
		rpid, repoch := cur.Client() // a retry: what the end handed out
		return 0, rpid, repoch
	}
	if err := h.update(p, cur, next); err != nil {
		h.done(id)
		return persistCode(err), -1, -1
	}
	h.finish(next) // clears busy
	rpid, repoch := next.Client()
	return 0, rpid, repoch
}
