package txn

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
)

// Status is a transaction's state, with Kafka's TransactionState numbers
// (they are stored in __transaction_state).
type Status int8

const (
	Empty          Status = 0
	Ongoing        Status = 1
	PrepareCommit  Status = 2
	PrepareAbort   Status = 3
	CompleteCommit Status = 4
	CompleteAbort  Status = 5
	Dead           Status = 6
)

func (s Status) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// Preparing says markers are being written.
func (s Status) Preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

// Txn is the coordinator's state of one transactional ID.
//
// INVARIANT: Partitions is sorted and without duplicates; it is empty in
// Empty and Complete* states.
type Txn struct {
	ID         string
	ProducerID int64
	Epoch      int16
	TimeoutMs  int32
	Status     Status
	Partitions []TP
	StartMs    int64 // when the ongoing transaction began
	UpdateMs   int64
	// TV2 says the transaction was ended by EndTxn v5+ (KIP-890 part 2,
	// transaction version 2): its end bumped the epoch, which the client
	// continues with. Stored as ClientTransactionVersion 2.
	TV2 bool
	// NextProducerID is, with HasNext in a Prepare* state whose epoch
	// bump overflowed, the producer ID the client continues with (at
	// epoch 0); the markers still carry ProducerID.
	NextProducerID int64
	HasNext        bool
	// PrevProducerID is, with HasPrev after such an overflow completed,
	// the producer ID the ended transaction ran under (a retry of its
	// EndTxn names it).
	PrevProducerID int64
	HasPrev        bool
}

// Client is the producer ID and epoch the client continues with: those
// of t, or the next producer ID at epoch 0 while an overflowing KIP-890
// bump is being prepared.
func (t *Txn) Client() (int64, int16) {
	if t.HasNext {
		return t.NextProducerID, 0
	}
	return t.ProducerID, t.Epoch
}

// Clone returns a deep copy.
func (t *Txn) Clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	return &c
}

// PartitionFor is the __transaction_state partition of id.
func PartitionFor(id string, partitions int32) int32 { return group.PartitionFor(id, partitions) }

// ErrCorrupt marks a __transaction_state record that does not decode.
var ErrCorrupt = errors.New("txn: corrupt transaction state record")

// EncodeKey is the record key of id.
func EncodeKey(id string) []byte {
	return (&kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}).AppendTo(nil)
}

// EncodeValue is the record value of t.
func EncodeValue(t *Txn) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = t.ProducerID, t.Epoch, t.TimeoutMs
	v.State, v.LastUpdateTimestamp, v.StartTimestamp = kmsg.TransactionState(t.Status), t.UpdateMs, t.StartMs
	if t.TV2 || t.HasNext || t.HasPrev {
		// v1 (flexible) carries KIP-890's fields as tagged fields.
		v.Version, v.ClientTransactionVersion = 1, 1
		if t.TV2 {
			v.ClientTransactionVersion = 2
		}
		if t.HasNext {
			v.NextProducerID = t.NextProducerID
		}
		if t.HasPrev {
			v.PreviousProducerID = t.PrevProducerID
		}
	}
	for _, p := range t.Partitions {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == p.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, p.Partition)
			continue
		}
		v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: p.Topic, Partitions: []int32{p.Partition}})
	}
	return v.AppendTo(nil)
}

// Decode parses a record; t is nil for a tombstone (value nil).
func Decode(key, value []byte) (id string, t *Txn, err error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil || k.Version != 0 {
		return "", nil, fmt.Errorf("%w: key version %d: %v", ErrCorrupt, k.Version, err)
	}
	if value == nil {
		return k.TransactionalID, nil, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return "", nil, fmt.Errorf("%w: value of %q: %v", ErrCorrupt, k.TransactionalID, err)
	}
	t = &Txn{ID: k.TransactionalID, ProducerID: v.ProducerID, Epoch: v.ProducerEpoch, TimeoutMs: v.TimeoutMillis,
		Status: Status(v.State), StartMs: v.StartTimestamp, UpdateMs: v.LastUpdateTimestamp,
		TV2: v.Version >= 1 && v.ClientTransactionVersion >= 2}
	if v.Version >= 1 && v.NextProducerID >= 0 {
		t.NextProducerID, t.HasNext = v.NextProducerID, true
	}
	if v.Version >= 1 && v.PreviousProducerID >= 0 {
		t.PrevProducerID, t.HasPrev = v.PreviousProducerID, true
	}
	if t.Status < Empty || t.Status > Dead {
		return "", nil, fmt.Errorf("%w: %q in state %d", ErrCorrupt, t.ID, v.State)
	}
	for _, tp := range v.Topics {
		for _, p := range tp.Partitions {
			t.Partitions = append(t.Partitions, TP{tp.Topic, p})
		}
	}
	t.Partitions = sortTPs(t.Partitions)
	return k.TransactionalID, t, nil
}

func sortTPs(ps []TP) []TP {
	slices.SortFunc(ps, func(a, b TP) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
	return slices.Compact(ps)
}

// Init is InitProducerId for a transactional ID. cur is the current state
// (nil if none); newID hands out a fresh producer ID. It returns the next
// state to persist. When cur has an open transaction, next is that
// transaction in PrepareAbort under a bumped epoch, and again is true: the
// caller finishes the abort (markers, CompleteAbort) and calls Init again.
func Init(cur *Txn, id string, timeoutMs, maxTimeoutMs int32, reqPID int64, reqEpoch int16, nowMs int64, newID func() (int64, error)) (next *Txn, again bool, code int16, err error) {
	if timeoutMs <= 0 || timeoutMs > maxTimeoutMs {
		return nil, false, kerr.InvalidTransactionTimeout.Code, nil
	}
	if cur == nil || cur.Status == Dead {
		pid, err := newID()
		if err != nil {
			return nil, false, 0, err
		}
		return &Txn{ID: id, ProducerID: pid, Epoch: 0, TimeoutMs: timeoutMs, Status: Empty, UpdateMs: nowMs}, false, 0, nil
	}
	if cur.Status.Preparing() {
		return nil, false, kerr.ConcurrentTransactions.Code, nil
	}
	if reqPID >= 0 && (reqPID != cur.ProducerID || reqEpoch != cur.Epoch) {
		// KIP-360: only the current instance may ask to keep its ID.
		if reqPID == cur.ProducerID && reqEpoch < cur.Epoch {
			return nil, false, kerr.ProducerFenced.Code, nil
		}
		return nil, false, kerr.InvalidProducerIDMapping.Code, nil
	}
	next = cur.Clone()
	next.TimeoutMs, next.UpdateMs = timeoutMs, nowMs
	next.TV2, next.HasNext, next.HasPrev = false, false, false
	if next.Epoch >= math.MaxInt16-1 {
		pid, err := newID()
		if err != nil {
			return nil, false, 0, err
		}
		next.ProducerID, next.Epoch = pid, -1
	}
	next.Epoch++
	if cur.Status == Ongoing {
		next.Status = PrepareAbort // the previous instance's transaction dies
		return next, true, 0, nil
	}
	next.Status, next.Partitions, next.StartMs = Empty, nil, 0
	return next, false, 0, nil
}

// checkProducer applies fencing: the producer must be the ID's current
// producer at its current epoch.
func checkProducer(cur *Txn, pid int64, epoch int16) int16 {
	switch {
	case cur == nil || cur.ProducerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case epoch < cur.Epoch:
		return kerr.ProducerFenced.Code
	case epoch > cur.Epoch:
		return kerr.InvalidProducerEpoch.Code
	}
	return 0
}

// Add is AddPartitionsToTxn / AddOffsetsToTxn: it returns the next state
// (nil if nothing changes) or an error code.
func Add(cur *Txn, pid int64, epoch int16, parts []TP, nowMs int64) (*Txn, int16) {
	if code := checkProducer(cur, pid, epoch); code != 0 {
		return nil, code
	}
	if cur.Status.Preparing() {
		return nil, kerr.ConcurrentTransactions.Code
	}
	if cur.Status == Dead {
		return nil, kerr.InvalidTxnState.Code
	}
	next := cur.Clone()
	if next.Status != Ongoing {
		next.Status, next.Partitions, next.StartMs = Ongoing, nil, nowMs
	}
	next.Partitions = sortTPs(append(next.Partitions, parts...))
	next.UpdateMs = nowMs
	if cur.Status == Ongoing && slices.Equal(cur.Partitions, next.Partitions) {
		return nil, 0
	}
	return next, 0
}

// Has says t has an ongoing transaction of producer pid at epoch that
// includes p (KIP-890 part 1: a transactional produce is accepted only
// then).
func (t *Txn) Has(pid int64, epoch int16, p TP) bool {
	if t == nil || t.Status != Ongoing || t.ProducerID != pid || t.Epoch != epoch {
		return false
	}
	_, ok := slices.BinarySearchFunc(t.Partitions, p, func(a, b TP) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
	return ok
}

// Verify is AddPartitionsToTxn v4+ with VerifyOnly (KIP-890 part 1
// across brokers): 0 when the producer's transaction is ongoing at epoch
// with p added, else the code a partition leader refuses the batch with.
func Verify(cur *Txn, pid int64, epoch int16, p TP) int16 {
	if code := checkProducer(cur, pid, epoch); code != 0 {
		return code
	}
	if !cur.Has(pid, epoch, p) {
		return kerr.InvalidTxnState.Code
	}
	return 0
}

// End is EndTxn: the next state (Prepare*) to persist before the markers,
// nil with code 0 when the request repeats a transaction already
// completed the same way (a retry), or an error code.
//
// With tv2 (EndTxn v5+, KIP-890 part 2) the end bumps the epoch: the
// Prepare* state and its markers carry epoch+1, which the client
// continues with (Txn.Client), so a delayed EndTxn of this transaction
// arriving after the next one began is fenced by its stale epoch. When
// the epoch would overflow, newID hands out a producer ID the client
// continues with at epoch 0 (the markers keep the old one). A retry names
// the epoch before the bump. An abort with no transaction open bumps the
// epoch too (a client fencing its own late requests).
func End(cur *Txn, pid int64, epoch int16, commit, tv2 bool, nowMs int64, newID func() (int64, error)) (*Txn, int16, error) {
	if tv2 && cur != nil && cur.TV2 && retriedEnd(cur, pid, epoch, commit) {
		if cur.Status.Preparing() {
			return nil, kerr.ConcurrentTransactions.Code, nil
		}
		return nil, 0, nil
	}
	if code := checkProducer(cur, pid, epoch); code != 0 {
		return nil, code, nil
	}
	switch cur.Status {
	case Ongoing:
		next := cur.Clone()
		next.Status, next.UpdateMs = PrepareAbort, nowMs
		if commit {
			next.Status = PrepareCommit
		}
		return bumpEnd(next, tv2, newID)
	case Empty, CompleteCommit, CompleteAbort:
		if tv2 && !commit {
			next := cur.Clone()
			next.Status, next.Partitions, next.UpdateMs = PrepareAbort, nil, nowMs
			return bumpEnd(next, tv2, newID)
		}
		if !tv2 && (cur.Status == CompleteCommit) == commit && cur.Status != Empty {
			return nil, 0, nil
		}
	case PrepareCommit, PrepareAbort:
		if (cur.Status == PrepareCommit) == commit {
			return nil, kerr.ConcurrentTransactions.Code, nil
		}
	}
	return nil, kerr.InvalidTxnState.Code, nil
}

// bumpEnd applies KIP-890 part 2's epoch bump to a Prepare* state.
func bumpEnd(next *Txn, tv2 bool, newID func() (int64, error)) (*Txn, int16, error) {
	next.TV2, next.HasNext, next.HasPrev = tv2, false, false
	if !tv2 {
		return next, 0, nil
	}
	if next.Epoch < math.MaxInt16-1 {
		next.Epoch++
		return next, 0, nil
	}
	id, err := newID()
	if err != nil {
		return nil, 0, err
	}
	next.NextProducerID, next.HasNext = id, true
	return next, 0, nil
}

// retriedEnd says an EndTxn v5+ of producer pid at epoch repeats the end
// of cur's last transaction (the same outcome, the epoch before its bump).
func retriedEnd(cur *Txn, pid int64, epoch int16, commit bool) bool {
	var done bool
	switch cur.Status {
	case PrepareCommit, CompleteCommit:
		done = commit
	case PrepareAbort, CompleteAbort:
		done = !commit
	default:
		return false
	}
	if !done {
		return false
	}
	switch {
	case cur.HasNext: // preparing an overflow: not bumped
		return pid == cur.ProducerID && epoch == cur.Epoch
	case cur.HasPrev && cur.ProducerID != pid: // completed an overflow
		return pid == cur.PrevProducerID && cur.Epoch == 0 && epoch == math.MaxInt16-1
	}
	return pid == cur.ProducerID && epoch == cur.Epoch-1
}

// Complete is the state after every marker of a Prepare* state is written.
func Complete(cur *Txn, nowMs int64) *Txn {
	next := cur.Clone()
	next.Status = CompleteAbort
	if cur.Status == PrepareCommit {
		next.Status = CompleteCommit
	}
	if cur.HasNext { // a KIP-890 bump overflowed
		next.PrevProducerID, next.HasPrev = cur.ProducerID, true
		next.ProducerID, next.Epoch, next.HasNext = cur.NextProducerID, 0, false
	}
	next.Partitions, next.UpdateMs = nil, nowMs
	return next
}

// TimedOut says t is an open transaction older than its timeout; the
// coordinator aborts it (bumping the epoch, so the producer is fenced, as
// Kafka does).
func (t *Txn) TimedOut(nowMs int64) bool {
	return t.Status == Ongoing && nowMs-t.StartMs > int64(t.TimeoutMs)
}

// Expired says t is an ID without an open transaction whose state has
// not changed for expirationMs (transactional.id.expiration.ms): the
// coordinator forgets it with a tombstone, as Kafka does.
func (t *Txn) Expired(nowMs, expirationMs int64) bool {
	switch t.Status {
	case Empty, CompleteCommit, CompleteAbort:
		return nowMs-t.UpdateMs >= expirationMs
	}
	return false
}

// Abort is the PrepareAbort state of a timed out transaction, under a
// bumped epoch.
func Abort(cur *Txn, nowMs int64) *Txn {
	next := cur.Clone()
	next.Status, next.UpdateMs = PrepareAbort, nowMs
	next.TV2, next.HasNext, next.HasPrev = false, false, false
	if next.Epoch < math.MaxInt16-1 {
		next.Epoch++
	}
	return next
}
