package log

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/record"
)

// AbortedTxn is one aborted transaction of the partition: the producer,
// the offset of its first batch here and the offset of its ABORT marker.
// read_committed consumers skip the producer's batches in
// [FirstOffset, LastOffset]. LastStableOffset is the partition's last
// stable offset right after the marker.
type AbortedTxn struct {
	ProducerID, FirstOffset, LastOffset, LastStableOffset int64
}

// txnIndex is the transaction state readers need without appendMu: the
// first offset of every open transaction (for the last stable offset) and
// the aborted transactions whose marker is at or above the log start.
// Writers hold appendMu and then mu.
//
// INVARIANT: ongoing holds exactly the producers with inTxn set in
// Log.producers, with their txnFirst; aborted is sorted by LastOffset.
type txnIndex struct {
	mu      sync.Mutex
	ongoing map[int64]int64 // producer ID -> first offset; guarded by mu
	aborted []AbortedTxn    // guarded by mu
}

// resetLocked rebuilds ongoing from ps and installs aborted.
// REQUIRES: l.appendMu (or Open).
func (t *txnIndex) reset(ps producerState, aborted []AbortedTxn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ongoing = map[int64]int64{}
	for id, p := range ps {
		if p.inTxn {
			t.ongoing[id] = p.txnFirst
		}
	}
	t.aborted = aborted
}

// apply records one appended batch h (offsets assigned); ctl is the
// control type of a control batch. REQUIRES: l.appendMu.
func (t *txnIndex) apply(h record.Header, ctl int16) {
	if h.ProducerID < 0 || !h.Transactional() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !h.Control() {
		if _, ok := t.ongoing[h.ProducerID]; !ok {
			t.ongoing[h.ProducerID] = h.BaseOffset
		}
		return
	}
	first, ok := t.ongoing[h.ProducerID]
	delete(t.ongoing, h.ProducerID)
	if !ok || ctl != record.ControlAbort {
		return
	}
	lso := h.LastOffset() + 1
	for _, f := range t.ongoing {
		lso = min(lso, f)
	}
	t.aborted = append(t.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso})
}

// dropAborted forgets the aborted transaction whose ABORT marker of
// producer pid is at offset marker: the cleaner is removing the marker,
// and the transaction's records went before it. A read_committed client
// that was told of the transaction would skip the producer's later
// batches until it met the marker, which is no longer there.
func (t *txnIndex) dropAborted(pid, marker int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.aborted = slices.DeleteFunc(t.aborted, func(a AbortedTxn) bool { return a.ProducerID == pid && a.LastOffset == marker })
}

// snapshot returns the aborted transactions with a marker at or above
// start, for a producer snapshot.
func (t *txnIndex) snapshot(start int64) []AbortedTxn {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, _ := slices.BinarySearchFunc(t.aborted, start, func(a AbortedTxn, s int64) int {
		return cmpInt64(a.LastOffset, s)
	})
	if i > 0 {
		t.aborted = slices.Clone(t.aborted[i:]) // retention dropped their segments
	}
	return slices.Clone(t.aborted)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// FirstUnstableOffset returns the first offset of the oldest open
// transaction on the partition; ok is false when none is open. The last
// stable offset is the smaller of it and the high watermark.
func (l *Log) FirstUnstableOffset() (off int64, ok bool) {
	l.txns.mu.Lock()
	defer l.txns.mu.Unlock()
	for _, f := range l.txns.ongoing {
		if !ok || f < off {
			off, ok = f, true
		}
	}
	return off, ok
}

// LastStableOffset is min(hw, the first offset of the oldest open
// transaction).
func (l *Log) LastStableOffset(hw int64) int64 {
	if f, ok := l.FirstUnstableOffset(); ok && f < hw {
		return f
	}
	return hw
}

// AbortedTxns returns the aborted transactions that overlap [from, upTo):
// marker at or after from and first batch before upTo, in marker order.
func (l *Log) AbortedTxns(from, upTo int64) []AbortedTxn {
	l.txns.mu.Lock()
	defer l.txns.mu.Unlock()
	var out []AbortedTxn
	for _, a := range l.txns.aborted {
		if a.LastOffset >= from && a.FirstOffset < upTo {
			out = append(out, a)
		}
	}
	return out
}

// AppendMarker appends a transaction marker for producerID at epoch
// (COMMIT when commit, else ABORT) as the leader, stamped with
// leaderEpoch, and returns its offset. A marker for a producer without an
// open transaction here is still written (the coordinator does not know
// which partitions got data), as Kafka does.
func (l *Log) AppendMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, leaderEpoch int32, now int64) (int64, error) {
	b := record.MarkerBatch(producerID, epoch, commit, coordinatorEpoch, now)
	res, err := l.Append(b, AppendOptions{LeaderEpoch: leaderEpoch, CRCChecked: true, Verify: func() error {
		return l.CheckMarkerLocked(producerID, coordinatorEpoch)
	}})
	if err != nil {
		return -1, fmt.Errorf("log: append marker: %w", err)
	}
	return res.BaseOffset, nil
}

// controlTypeOf returns the control type and coordinator epoch of the
// control batch at the start of batch, -1 and -1 if it is not a control
// batch or can not be read.
func controlTypeOf(h record.Header, batch []byte) (int16, int32) {
	if !h.Control() {
		return -1, -1
	}
	ctl, ce, err := record.ControlMarker(batch)
	if err != nil {
		return -1, -1
	}
	return ctl, ce
}

// ErrCoordinatorFenced is a marker from a transaction coordinator older
// than one that already wrote a marker for the producer here (Kafka's
// coordinator epoch check): a deposed coordinator's late marker must not
// end a transaction the producer began since.
var ErrCoordinatorFenced = errors.New("log: transaction coordinator fenced")

// noteMarker records the coordinator epoch of a marker of h's producer.
// REQUIRES: l.appendMu (or Open).
func (ps producerState) noteMarker(h record.Header, coordEpoch int32) {
	if p := ps[h.ProducerID]; p != nil && h.Control() && coordEpoch > p.coordEpoch {
		p.coordEpoch = coordEpoch
	}
}

// ProducerInfo is one producer's state on the partition, for
// DescribeProducers.
type ProducerInfo struct {
	ID           int64
	Epoch        int16
	LastSequence int32 // -1 if no batch with a sequence is cached
	TxnStart     int64 // first offset of its open transaction, -1 if none
	LastOffset   int64 // last offset of its newest cached batch, -1 if none
}

// Producers returns the producers the partition keeps state for,
// ascending by ID.
func (l *Log) Producers() []ProducerInfo {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	out := make([]ProducerInfo, 0, len(l.producers))
	for id, p := range l.producers {
		pi := ProducerInfo{ID: id, Epoch: p.epoch, LastSequence: -1, TxnStart: -1, LastOffset: -1}
		if n := len(p.batches); n > 0 {
			pi.LastSequence, pi.LastOffset = p.batches[n-1].lastSeq, p.batches[n-1].lastOffset
		}
		if p.inTxn {
			pi.TxnStart = p.txnFirst
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmpInt64(a.ID, b.ID) })
	return out
}

// VerificationGuard marks a transaction check in flight for one producer
// on the partition (Kafka's verification guard, KIP-890 part 1): a
// broker whose transaction coordinator is elsewhere takes one, asks the
// coordinator, and appends only if no marker of the producer was
// appended meanwhile (a marker drops the guard).
type VerificationGuard struct{ _ byte }

// BeginVerification takes a fresh guard for producer pid, replacing any
// earlier one.
func (l *Log) BeginVerification(pid int64) *VerificationGuard {
	g := &VerificationGuard{}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.guards == nil {
		l.guards = map[int64]*VerificationGuard{}
	}
	l.guards[pid] = g
	return g
}

// VerifiedLocked says g is still pid's guard: no marker of pid was
// appended since BeginVerification. REQUIRES: l.appendMu (call it from
// AppendOptions.Verify).
func (l *Log) VerifiedLocked(pid int64, g *VerificationGuard) bool {
	return g != nil && l.guards[pid] == g
}

// CheckMarkerLocked refuses (ErrCoordinatorFenced) a marker for pid from
// a coordinator epoch older than the newest marker of pid here.
// REQUIRES: l.appendMu (from AppendOptions.Verify).
func (l *Log) CheckMarkerLocked(pid int64, coordEpoch int32) error {
	if p := l.producers[pid]; p != nil && coordEpoch < p.coordEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, %d seen", ErrCoordinatorFenced, pid, coordEpoch, p.coordEpoch)
	}
	return nil
}

// OpenTxn says producer pid has a transaction open on the partition at
// epoch.
func (l *Log) OpenTxn(pid int64, epoch int16) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.OpenTxnLocked(pid, epoch)
}

// OpenTxnLocked is OpenTxn with l.appendMu held (from
// AppendOptions.Verify).
func (l *Log) OpenTxnLocked(pid int64, epoch int16) bool {
	p := l.producers[pid]
	return p != nil && p.inTxn && p.epoch == epoch
}

// checkTxnsLocked checks txnIndex's invariant against the producer state
// (invariants build tag only). REQUIRES: l.appendMu.
func (l *Log) checkTxnsLocked() {
	l.txns.mu.Lock()
	defer l.txns.mu.Unlock()
	n := 0
	for id, p := range l.producers {
		if !p.inTxn {
			continue
		}
		n++
		f, ok := l.txns.ongoing[id]
		invariant.Check(ok && f == p.txnFirst, "log %s: producer %d has a transaction open at %d, index says %d (%v)", l.dir, id, p.txnFirst, f, ok)
	}
	invariant.Check(n == len(l.txns.ongoing), "log %s: %d open transactions in the producer state, %d in the index", l.dir, n, len(l.txns.ongoing))
	for i := 1; i < len(l.txns.aborted); i++ {
		invariant.Check(l.txns.aborted[i-1].LastOffset < l.txns.aborted[i].LastOffset, "log %s: aborted transactions out of order at %d", l.dir, i)
	}
}

// abortedBatch says h is a batch of an aborted transaction: the cleaner
// does not let its keys shadow committed records.
func (p *cleanPass) abortedBatch(h record.Header) bool {
	if !h.Transactional() || h.Control() {
		return false
	}
	if p.aborted == nil {
		p.aborted = p.l.AbortedTxns(0, math.MaxInt64)
	}
	for _, a := range p.aborted {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}
