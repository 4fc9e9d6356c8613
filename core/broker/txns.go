package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/txn"
)

// txnStateTopic is the internal topic holding transaction state.
const txnStateTopic = "__transaction_state"

// txnHost runs the transaction coordinator (core/txn) for the broker
// (issue 11). Each transactional ID's state lives in its
// __transaction_state partition; this broker coordinates the IDs of the
// partitions it leads. A partition is loaded (its records replayed) when
// this broker becomes its leader (the cluster applier kicks the timeout
// goroutine, as Kafka loads on election), at the first request, or at the
// next tick of the timeout goroutine (transaction.abort.timed.out.
// transaction.cleanup.interval.ms), whichever comes first: the IDs of a failed
// coordinator are taken over even when their producers are silent, so
// their open transactions time out and their Prepare* states get their
// markers. It is loaded at that leader epoch, and its IDs are dropped when
// it is no longer led at that epoch (unload), so a deposed coordinator
// answers NOT_COORDINATOR instead of acting on stale state.
//
// Every state change is appended to __transaction_state and replicated
// (acks=all) before it is acted on: Prepare* before any marker, Complete*
// after the last. Marker writing for one ID runs outside mu; meanwhile the
// ID is busy and requests for it get CONCURRENT_TRANSACTIONS (retriable).
//
// Lock order: txnHost.mu, then a partition's leader/ISR lock (appends).
// The timeout goroutine (run) is owned by the broker (b.wg, b.stopCh).
type txnHost struct {
	b *Broker

	mu     sync.Mutex
	txns   map[string]*txn.Txn // loaded IDs; guarded by mu
	loaded map[int32]int32     // __transaction_state partition -> leader epoch loaded at; guarded by mu
	busy   map[string]bool     // IDs whose markers are being written; guarded by mu
	// view mirrors txns (ID -> *txn.Txn, never modified once stored) for
	// the produce path's check (verify), which runs under a partition's
	// leader/ISR lock and so must not take mu.
	view sync.Map
	// loadedAt mirrors loaded (partition -> leader epoch) for verify.
	loadedAt sync.Map

	createMu sync.Mutex    // serializes creating __transaction_state
	peers    peers         // clients of the other brokers (txn_verify.go)
	loadCh   chan struct{} // kick: leadership of __transaction_state may have changed
}

// kick wakes the timeout goroutine to load the __transaction_state
// partitions this broker has come to lead. Safe on a nil host.
func (h *txnHost) kick() {
	if h == nil {
		return
	}
	select {
	case h.loadCh <- struct{}{}:
	default:
	}
}

func (b *Broker) startTxns() {
	h := &txnHost{b: b, txns: map[string]*txn.Txn{}, loaded: map[int32]int32{}, busy: map[string]bool{}, loadCh: make(chan struct{}, 1)}
	b.txns = h
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		h.run()
	}()
}

// ensureTopic creates __transaction_state on first use, compacted, with
// the transaction.state.log.* settings.
func (h *txnHost) ensureTopic(ctx context.Context) error {
	b := h.b
	if b.topic(txnStateTopic) != nil {
		return nil
	}
	h.createMu.Lock()
	defer h.createMu.Unlock()
	if b.topic(txnStateTopic) != nil {
		return nil
	}
	live := len(b.liveBrokers())
	rf := max(1, min(b.cfg.TransactionStateLogReplicationFactor, int16(live)))
	minISR := max(1, min(b.cfg.TransactionStateLogMinIsr, int32(rf)))
	_, code, msg := b.createTopic(ctx, txnStateTopic, b.cfg.TransactionStateLogNumPartitions, rf, map[string]string{
		"cleanup.policy":      "compact",
		"segment.bytes":       strconv.FormatInt(b.cfg.TransactionStateLogSegmentBytes, 10),
		"min.insync.replicas": strconv.FormatInt(int64(minISR), 10),
	}, false)
	if code != 0 && code != errTopicAlreadyExists {
		return fmt.Errorf("broker: create %s: %s (%s)", txnStateTopic, msg, kerr.ErrorForCode(code))
	}
	return nil
}

// partitionOf returns the __transaction_state partition of id.
func (h *txnHost) partitionOf(id string) (*partition, int32, bool) {
	t := h.b.topic(txnStateTopic)
	if t == nil {
		return nil, -1, false
	}
	i := txn.PartitionFor(id, int32(len(t.partitions)))
	p := t.partition(i)
	return p, i, p != nil
}

// coordinatorLocked makes this broker ready to coordinate id: its
// partition is led here and loaded at the current leader epoch. It
// returns the partition or an error code. REQUIRES: h.mu.
func (h *txnHost) coordinatorLocked(id string) (*partition, int16) {
	h.unloadLocked()
	p, i, ok := h.partitionOf(id)
	if !ok {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	st := p.State()
	if st.Role != part.Leader {
		return nil, kerr.NotCoordinator.Code
	}
	if code := h.ensureLoadedLocked(p, i, st.View.LeaderEpoch); code != 0 {
		return nil, code
	}
	return p, 0
}

// ensureLoadedLocked loads partition p (index i), led here at epoch,
// unless it is loaded at that epoch already. REQUIRES: h.mu.
func (h *txnHost) ensureLoadedLocked(p *partition, i, epoch int32) int16 {
	if e, ok := h.loaded[i]; ok && e == epoch {
		return 0
	}
	if err := h.loadLocked(p, i); err != nil {
		h.b.logger.Warn("broker: load __transaction_state", "partition", i, "err", err)
		return kerr.CoordinatorLoadInProgress.Code
	}
	h.loaded[i] = epoch
	h.loadedAt.Store(i, epoch)
	return 0
}

// loadLedLocked loads every __transaction_state partition this broker
// leads and has not loaded at its leader epoch: a new coordinator takes
// over the IDs of its partitions on election, as Kafka's does, so it
// times out their open transactions and finishes the markers of their
// Prepare* states even when no client asks about them. REQUIRES: h.mu.
func (h *txnHost) loadLedLocked() {
	t := h.b.topic(txnStateTopic)
	if t == nil {
		return
	}
	for i := range int32(len(t.partitions)) {
		p := t.partition(i)
		if p == nil {
			continue
		}
		if st := p.State(); st.Role == part.Leader {
			h.ensureLoadedLocked(p, i, st.View.LeaderEpoch)
		}
	}
}

// unloadLocked drops the IDs of partitions this broker no longer leads at
// the epoch it loaded them at. REQUIRES: h.mu.
func (h *txnHost) unloadLocked() {
	t := h.b.topic(txnStateTopic)
	for i, e := range h.loaded {
		var p *partition
		if t != nil {
			p = t.partition(i)
		}
		if p != nil {
			if st := p.State(); st.Role == part.Leader && st.View.LeaderEpoch == e {
				continue
			}
		}
		delete(h.loaded, i)
		h.loadedAt.Delete(i)
		n := int32(0)
		if t != nil {
			n = int32(len(t.partitions))
		}
		for id := range h.txns {
			if n == 0 || txn.PartitionFor(id, n) == i {
				delete(h.txns, id)
				h.view.Delete(id)
			}
		}
		h.b.logger.Info("broker: transaction coordinator unloaded", "partition", i)
	}
}

// loadLocked replays partition i into h.txns; transactions found in a
// Prepare* state get their markers finished in the background.
// REQUIRES: h.mu.
func (h *txnHost) loadLocked(p *partition, i int32) error {
	n := int32(len(h.b.topic(txnStateTopic).partitions))
	for id := range h.txns {
		if txn.PartitionFor(id, n) == i {
			delete(h.txns, id)
			h.view.Delete(id)
		}
	}
	found := map[string]*txn.Txn{}
	off, end := p.log.StartOffset(), p.log.EndOffset()
	var decodeErr error
	for off < end {
		next, err := replayChunk(p, off, end, func(key, value []byte) {
			id, t, err := txn.Decode(key, value)
			if err != nil {
				decodeErr = err
				return
			}
			found[id] = t
		})
		if err != nil {
			return err
		}
		if next <= off {
			break
		}
		off = next
	}
	if decodeErr != nil {
		h.b.logger.Warn("broker: __transaction_state holds an undecodable record", "partition", i, "err", decodeErr)
	}
	for id, t := range found {
		if t == nil {
			continue
		}
		h.txns[id] = t
		h.view.Store(id, t)
		if t.Status.Preparing() && !h.busy[id] {
			h.busy[id] = true
			h.b.wg.Add(1)
			go func() {
				defer h.b.wg.Done()
				h.finish(t)
			}()
		}
	}
	h.b.logger.Info("broker: transaction coordinator loaded", "partition", i, "ids", len(found))
	return nil
}

// persist appends t's state to its partition and waits until the ISR has
// it. It must be called without h.mu (it waits for replication).
func (h *txnHost) persist(p *partition, t *txn.Txn) error {
	return h.persistRecord(p, txn.EncodeKey(t.ID), txn.EncodeValue(t))
}

// persistRecord appends one record (a nil value is a tombstone) to p and
// waits until the ISR has it. It must be called without h.mu.
func (h *txnHost) persistRecord(p *partition, key, value []byte) error {
	now := time.Now()
	batch := recordBatchKV(key, value, now.UnixMilli())
	res, epoch, err := p.AppendAsLeader(batch, now, nil)
	if err != nil {
		return err
	}
	w := ackWait{p: p, last: res.LastOffset, epoch: epoch, minISR: p.Config().MinInsyncReplicas}
	timer := time.NewTimer(offsetsCommitTimeout)
	defer timer.Stop()
	expired := false
	return h.b.awaitAck(context.Background(), w, timer.C, &expired)
}

// recordBatchKV is one record as an uncompressed batch.
func recordBatchKV(key, value []byte, ts int64) []byte {
	return recordBatchRecs([]kmsg.Record{{Key: key, Value: value}}, ts)
}

// update persists next as id's state and installs it. The caller holds
// id's busy flag, so no other change of id runs meanwhile; a state that
// was unloaded meanwhile (leadership moved) is not installed.
func (h *txnHost) update(p *partition, cur, next *txn.Txn) error {
	if err := h.persist(p, next); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.txns[next.ID] != cur {
		return errors.New("broker: transaction state unloaded meanwhile")
	}
	h.txns[next.ID] = next
	h.view.Store(next.ID, next)
	return nil
}

// finish writes the markers of a Prepare* state t to every partition of
// the transaction, retrying across leader changes until all are written
// or the broker stops, then persists Complete*. The caller marked t.ID
// busy; finish clears it. It reports whether the transaction completed.
func (h *txnHost) finish(t *txn.Txn) bool {
	defer func() {
		h.mu.Lock()
		delete(h.busy, t.ID)
		h.mu.Unlock()
	}()
	commit := t.Status == txn.PrepareCommit
	// The coordinator epoch is the leader epoch of the ID's
	// __transaction_state partition: markers carry it, and a partition
	// refuses markers of an older one (a deposed coordinator's).
	p, i, ok := h.partitionOf(t.ID)
	h.mu.Lock()
	coordEpoch, loaded := h.loaded[i]
	h.mu.Unlock()
	if !ok || !loaded {
		return false
	}
	pending := append([]txn.TP(nil), t.Partitions...)
	backoff := 20 * time.Millisecond
	for len(pending) > 0 {
		if st := p.State(); st.Role != part.Leader || st.View.LeaderEpoch != coordEpoch {
			return false // deposed: the new coordinator finishes the markers
		}
		pending = h.writeMarkers(t.ProducerID, t.Epoch, commit, coordEpoch, pending)
		if len(pending) == 0 {
			break
		}
		select {
		case <-h.b.stopCh:
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	h.mu.Lock()
	cur := h.txns[t.ID]
	p, code := h.coordinatorLocked(t.ID)
	h.mu.Unlock()
	if code == 0 && p.State().View.LeaderEpoch != coordEpoch {
		return false
	}
	if cur == nil || code != 0 || cur.ProducerID != t.ProducerID || cur.Epoch != t.Epoch || cur.Status != t.Status {
		return false // moved away; the new coordinator finishes it
	}
	if err := h.update(p, cur, txn.Complete(cur, time.Now().UnixMilli())); err != nil {
		h.b.logger.Warn("broker: complete transaction", "transactional_id", t.ID, "err", err)
		return false
	}
	return true
}

// writeMarkers writes one marker per partition: in-process where this
// broker leads, with WriteTxnMarkers to the leader elsewhere. It returns
// the partitions still to do.
func (h *txnHost) writeMarkers(pid int64, epoch int16, commit bool, coordEpoch int32, tps []txn.TP) []txn.TP {
	var remote = map[int32][]txn.TP{}
	var left []txn.TP
	for _, tp := range tps {
		code := h.b.writeMarker(tp, pid, epoch, commit, coordEpoch)
		switch code {
		case 0, kerr.TransactionCoordinatorFenced.Code:
			// Fenced: a newer coordinator wrote this partition's marker.
		case kerr.NotLeaderForPartition.Code:
			t := h.b.topic(tp.Topic)
			var p *partition
			if t != nil {
				p = t.partition(tp.Partition)
			}
			if p == nil {
				continue // the topic was deleted: nothing to mark
			}
			if l := p.State().View.Leader; l >= 0 && l != h.b.cfg.NodeID {
				remote[l] = append(remote[l], tp)
			} else {
				left = append(left, tp)
			}
		case kerr.UnknownTopicOrPartition.Code:
			// deleted meanwhile: nothing to mark
		default:
			left = append(left, tp)
		}
	}
	for leader, tps := range remote {
		left = append(left, h.sendMarkers(leader, pid, epoch, commit, coordEpoch, tps)...)
	}
	return left
}

// sendMarkers sends WriteTxnMarkers to broker id; it returns the
// partitions not written.
func (h *txnHost) sendMarkers(id int32, pid int64, epoch int16, commit bool, coordEpoch int32, tps []txn.TP) []txn.TP {
	br := h.peer(id)
	if br == nil {
		return tps
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(m.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			m.Topics = append(m.Topics, rt)
		}
		m.Topics[i].Partitions = append(m.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, br)
	if err != nil || len(resp.Markers) != 1 {
		return tps
	}
	var left []txn.TP
	for _, rt := range resp.Markers[0].Topics {
		for _, rp := range rt.Partitions {
			switch rp.ErrorCode {
			case 0, kerr.UnknownTopicOrPartition.Code, kerr.TransactionCoordinatorFenced.Code:
			default:
				left = append(left, txn.TP{Topic: rt.Topic, Partition: rp.Partition})
			}
		}
	}
	return left
}

// writeMarker appends a marker to a partition this broker leads and
// tells the group coordinator about transactional offsets when the
// partition is __consumer_offsets. It returns a Kafka error code.
func (b *Broker) writeMarker(tp txn.TP, pid int64, epoch int16, commit bool, coordEpoch int32) int16 {
	t := b.topic(tp.Topic)
	var p *partition
	if t != nil {
		p = t.partition(tp.Partition)
	}
	if p == nil {
		return kerr.UnknownTopicOrPartition.Code
	}
	now := time.Now()
	res, lepoch, err := p.AppendAsLeaderVerified(record.MarkerBatch(pid, epoch, commit, coordEpoch, now.UnixMilli()), now, nil,
		func() error { return p.log.CheckMarkerLocked(pid, coordEpoch) })
	switch {
	case errors.Is(err, part.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, log.ErrCoordinatorFenced):
		b.logger.Info("broker: transaction marker from a deposed coordinator refused", "partition", p.String(), "producer_id", pid, "err", err)
		return kerr.TransactionCoordinatorFenced.Code
	case err != nil:
		b.logger.Warn("broker: write transaction marker", "partition", p.String(), "err", err)
		return produceErrorCode(err).Code
	}
	timer := time.NewTimer(offsetsCommitTimeout)
	defer timer.Stop()
	expired := false
	if err := b.awaitAck(context.Background(), ackWait{p: p, last: res.LastOffset, epoch: lepoch, minISR: 1}, timer.C, &expired); err != nil {
		return kerr.NotEnoughReplicasAfterAppend.Code
	}
	if tp.Topic == offsetsTopic && b.groups != nil {
		b.completeTxnOffsets(pid, tp.Partition, commit)
	}
	return 0
}

// run aborts transactions past their timeout, every
// transaction.abort.timed.out.transaction.cleanup.interval.ms, and forgets
// expired transactional IDs, every
// transaction.remove.expired.transaction.cleanup.interval.ms, until the
// broker stops.
func (h *txnHost) run() {
	every := time.Duration(h.b.cfg.TransactionAbortTimedOutTransactionCleanupIntervalMs) * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	expiry := time.NewTicker(time.Duration(h.b.cfg.TransactionRemoveExpiredTransactionCleanupIntervalMs) * time.Millisecond)
	defer expiry.Stop()
	defer h.closePeers()
	for {
		select {
		case <-h.b.stopCh:
			return
		case <-t.C:
			h.abortTimedOut()
		case <-expiry.C:
			h.expireIDs()
		case <-h.loadCh:
			h.mu.Lock()
			h.unloadLocked()
			h.loadLedLocked()
			h.mu.Unlock()
		}
	}
}

// expireIDs forgets the transactional IDs this broker coordinates that
// have had no transaction for transactional.id.expiration.ms: a tombstone
// in __transaction_state (so no later load brings them back), then out of
// memory. An ID is busy meanwhile, so a request for it waits
// (CONCURRENT_TRANSACTIONS) and then starts afresh with a new producer ID.
func (h *txnHost) expireIDs() {
	now := time.Now().UnixMilli()
	h.mu.Lock()
	h.unloadLocked()
	var due []*txn.Txn
	for id, t := range h.txns {
		if !h.busy[id] && t.Expired(now, h.b.cfg.TransactionalIDExpirationMs) {
			h.busy[id] = true
			due = append(due, t)
		}
	}
	h.mu.Unlock()
	for _, cur := range due {
		h.expire(cur)
	}
}

// expire writes cur's tombstone and drops it; the caller marked it busy.
func (h *txnHost) expire(cur *txn.Txn) {
	defer h.done(cur.ID)
	h.mu.Lock()
	p, code := h.coordinatorLocked(cur.ID)
	still := h.txns[cur.ID] == cur
	h.mu.Unlock()
	if code != 0 || !still {
		return
	}
	if err := h.persistRecord(p, txn.EncodeKey(cur.ID), nil); err != nil {
		h.b.logger.Warn("broker: expire transactional id", "transactional_id", cur.ID, "err", err)
		return
	}
	h.mu.Lock()
	if h.txns[cur.ID] == cur {
		delete(h.txns, cur.ID)
		h.view.Delete(cur.ID)
	}
	h.mu.Unlock()
	h.b.logger.Info("broker: transactional id expired", "transactional_id", cur.ID, "producer_id", cur.ProducerID,
		"idle_ms", time.Now().UnixMilli()-cur.UpdateMs)
}

func (h *txnHost) abortTimedOut() {
	now := time.Now().UnixMilli()
	h.mu.Lock()
	h.unloadLocked()
	h.loadLedLocked()
	var due []*txn.Txn
	for id, t := range h.txns {
		if !h.busy[id] && t.TimedOut(now) {
			h.busy[id] = true
			due = append(due, t)
		}
	}
	h.mu.Unlock()
	for _, cur := range due {
		h.mu.Lock()
		p, code := h.coordinatorLocked(cur.ID)
		h.mu.Unlock()
		next := txn.Abort(cur, now)
		if code != 0 || h.update(p, cur, next) != nil {
			h.mu.Lock()
			delete(h.busy, cur.ID)
			h.mu.Unlock()
			continue
		}
		h.b.logger.Info("broker: aborted a transaction past its timeout", "transactional_id", cur.ID, "producer_id", cur.ProducerID, "timeout_ms", cur.TimeoutMs)
		h.finish(next)
	}
}

// verify checks that a transactional batch of producer pid at epoch for
// tp belongs to an ongoing transaction that includes tp (KIP-890 part 1):
// nil if so, else an error carrying the Kafka code. It runs under tp's
// leader/ISR lock, so it reads only the lock-free mirrors (view,
// loadedAt) and the __transaction_state partition's published state.
// While the ID's partition is led here but not loaded yet, the answer is
// COORDINATOR_LOAD_IN_PROGRESS (retriable) and a load starts. When another
// broker coordinates the ID it can not tell and accepts (not yet verified
// across brokers, see 00_produce.go).
func (h *txnHost) verify(id *string, pid int64, epoch int16, tp txn.TP) error {
	if id == nil || tp.Topic == txnStateTopic {
		// Without the transactional ID the batch can not be checked; the
		// coordinator's own topic takes no transactional batches.
		return kerr.InvalidTxnState
	}
	p, i, ok := h.partitionOf(*id)
	if !ok {
		return kerr.InvalidTxnState
	}
	st := p.State()
	if st.Role != part.Leader {
		return nil // coordinated elsewhere
	}
	if e, ok := h.loadedAt.Load(i); !ok || e.(int32) != st.View.LeaderEpoch {
		h.loadAsync(*id)
		return kerr.CoordinatorLoadInProgress
	}
	if v, ok := h.view.Load(*id); ok && v.(*txn.Txn).Has(pid, epoch, tp) {
		return nil
	}
	return kerr.InvalidTxnState
}

// loadAsync loads id's partition in a goroutine owned by the broker.
func (h *txnHost) loadAsync(id string) {
	select {
	case <-h.b.stopCh:
		return
	default:
	}
	h.b.wg.Add(1)
	go func() {
		defer h.b.wg.Done()
		h.mu.Lock()
		h.coordinatorLocked(id)
		h.mu.Unlock()
	}()
}

// recordBatchRecs encodes records as one uncompressed RecordBatch v2
// without a producer.
func recordBatchRecs(recs []kmsg.Record, ts int64) []byte {
	var raw []byte
	for i, kr := range recs {
		kr.OffsetDelta = int32(i)
		body := kr.AppendTo(nil)[1:] // with Length 0, the length varint is one byte
		kr.Length = int32(len(body))
		raw = kr.AppendTo(raw)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: raw,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	record.SetCRC(out)
	return out
}
