package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/vltava/vltava/core/record"
)

// maxProducerBatches is how many recent batches per producer are kept for
// duplicate detection; Kafka clients keep at most 5 requests in flight.
const maxProducerBatches = 5

// seqBatch is the sequence range and offsets of one appended batch.
type seqBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producer is the idempotence state of one producer ID.
type producer struct {
	epoch   int16
	batches []seqBatch // oldest first, at most maxProducerBatches
	// inTxn says a transaction of this producer is open on the partition:
	// a transactional batch was appended and no marker since; txnFirst is
	// the offset of its first batch (txn.go).
	inTxn    bool
	txnFirst int64
	// coordEpoch is the newest coordinator epoch of a marker of this
	// producer here (CheckMarkerLocked).
	coordEpoch int32
}

func (p *producer) clone() *producer {
	c := *p
	c.batches = slices.Clone(p.batches)
	return &c
}

// lastSequence is the sequence of a batch's last record; sequences wrap
// from MaxInt32 to 0.
func lastSequence(base, delta int32) int32 {
	if base > math.MaxInt32-delta {
		return base - (math.MaxInt32 - delta) - 1
	}
	return base + delta
}

func nextSequence(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// check validates a client batch against the producer's state (p may be
// nil for an unknown producer). It returns the cached batch if h repeats
// one, ErrInvalidProducerEpoch for a fenced epoch, ErrOutOfOrderSequence
// for a gap.
func (p *producer) check(h record.Header) (*seqBatch, error) {
	if p == nil {
		return nil, nil // unknown or expired producer: accept any sequence
	}
	if h.ProducerEpoch < p.epoch {
		return nil, fmt.Errorf("%w: epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerEpoch, p.epoch)
	}
	if h.Control() || h.BaseSequence < 0 {
		return nil, nil // markers carry no sequence
	}
	if h.ProducerEpoch > p.epoch {
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	last := lastSequence(h.BaseSequence, h.LastOffsetDelta)
	for i := range p.batches {
		if b := &p.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			return b, nil
		}
	}
	if n := len(p.batches); n > 0 && h.BaseSequence != nextSequence(p.batches[n-1].lastSeq) {
		return nil, fmt.Errorf("%w: sequence %d, expected %d", ErrOutOfOrderSequence, h.BaseSequence, nextSequence(p.batches[n-1].lastSeq))
	}
	return nil, nil
}

// update records an appended batch (offsets assigned) in the state.
func (p *producer) update(h record.Header) {
	if h.ProducerEpoch != p.epoch {
		p.epoch = h.ProducerEpoch
		p.batches = p.batches[:0]
	}
	switch {
	case h.Control():
		p.inTxn = false // a marker ends the transaction (txn.go)
	case h.Transactional() && !p.inTxn:
		p.inTxn, p.txnFirst = true, h.BaseOffset
	}
	if h.Control() || h.BaseSequence < 0 {
		return
	}
	if len(p.batches) == maxProducerBatches {
		p.batches = slices.Delete(p.batches, 0, 1)
	}
	p.batches = append(p.batches, seqBatch{
		firstSeq: h.BaseSequence, lastSeq: lastSequence(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
	})
}

// producerState is the idempotence state of a partition, keyed by
// producer ID.
type producerState map[int64]*producer

// apply records a batch from the log without validation (recovery).
func (ps producerState) apply(h record.Header) {
	if h.ProducerID < 0 {
		return
	}
	p := ps[h.ProducerID]
	if p == nil {
		p = &producer{epoch: h.ProducerEpoch}
		ps[h.ProducerID] = p
	}
	p.update(h)
}

// prune forgets producers whose every cached batch lies below start, as
// Kafka does when the log start offset moves past them.
func (ps producerState) prune(start int64) {
	for id, p := range ps {
		if p.inTxn {
			continue // its transaction still holds back the last stable offset
		}
		if n := len(p.batches); n > 0 && p.batches[n-1].lastOffset < start {
			delete(ps, id)
		}
	}
}

// Snapshot layout constants; part of the on-disk format.
const (
	snapshotMagic     = "VLPS"
	snapshotVersion   = 2
	snapshotHeader    = 13 // magic 4, version 1, crc 4, count 4
	snapshotEntryHead = 11 // producerID 8, epoch 2, batch count 1
	snapshotBatchSize = 24 // firstSeq 4, lastSeq 4, firstOffset 8, lastOffset 8
	snapshotTxnSize   = 13 // v2, after the batches: inTxn 1, txnFirst 8, coordEpoch 4
	abortedEntrySize  = 32 // v2 trailer entry: producerID, firstOffset, lastOffset, lastStableOffset, 8 each
)

func encodeSnapshot(ps producerState, aborted []AbortedTxn) []byte {
	ids := make([]int64, 0, len(ps))
	for id := range ps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	be := binary.BigEndian
	b := make([]byte, snapshotHeader, snapshotHeader+len(ids)*(snapshotEntryHead+2*snapshotBatchSize))
	copy(b, snapshotMagic)
	b[4] = snapshotVersion
	be.PutUint32(b[9:], uint32(len(ids)))
	for _, id := range ids {
		p := ps[id]
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(p.epoch))
		b = append(b, byte(len(p.batches)))
		for _, sb := range p.batches {
			b = be.AppendUint32(b, uint32(sb.firstSeq))
			b = be.AppendUint32(b, uint32(sb.lastSeq))
			b = be.AppendUint64(b, uint64(sb.firstOffset))
			b = be.AppendUint64(b, uint64(sb.lastOffset))
		}
		inTxn := byte(0)
		if p.inTxn {
			inTxn = 1
		}
		b = append(b, inTxn)
		b = be.AppendUint64(b, uint64(p.txnFirst))
		b = be.AppendUint32(b, uint32(p.coordEpoch))
	}
	b = be.AppendUint32(b, uint32(len(aborted)))
	for _, a := range aborted {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
		b = be.AppendUint64(b, uint64(a.LastStableOffset))
	}
	be.PutUint32(b[5:], crc32.Checksum(b[9:], castagnoli))
	return b
}

func decodeSnapshot(b []byte) (producerState, []AbortedTxn, error) {
	be := binary.BigEndian
	if len(b) < snapshotHeader || string(b[:4]) != snapshotMagic || (b[4] != 1 && b[4] != snapshotVersion) {
		return nil, nil, fmt.Errorf("%w: bad producer snapshot header", record.ErrCorrupt)
	}
	if crc32.Checksum(b[9:], castagnoli) != be.Uint32(b[5:]) {
		return nil, nil, fmt.Errorf("%w: producer snapshot crc mismatch", record.ErrCorrupt)
	}
	v2 := b[4] == 2
	n := int(be.Uint32(b[9:]))
	rest := b[snapshotHeader:]
	ps := make(producerState, min(n, len(rest)/snapshotEntryHead))
	prev := int64(math.MinInt64)
	for i := range n {
		if len(rest) < snapshotEntryHead {
			return nil, nil, fmt.Errorf("%w: producer snapshot truncated", record.ErrCorrupt)
		}
		id, k := int64(be.Uint64(rest)), int(rest[10])
		if i > 0 && id <= prev {
			return nil, nil, fmt.Errorf("%w: producer snapshot ids not ascending", record.ErrCorrupt)
		}
		prev = id
		p := &producer{epoch: int16(be.Uint16(rest[8:]))}
		rest = rest[snapshotEntryHead:]
		if k > maxProducerBatches || len(rest) < k*snapshotBatchSize {
			return nil, nil, fmt.Errorf("%w: producer snapshot entry of %d batches", record.ErrCorrupt, k)
		}
		for range k {
			p.batches = append(p.batches, seqBatch{
				firstSeq: int32(be.Uint32(rest)), lastSeq: int32(be.Uint32(rest[4:])),
				firstOffset: int64(be.Uint64(rest[8:])), lastOffset: int64(be.Uint64(rest[16:])),
			})
			rest = rest[snapshotBatchSize:]
		}
		if v2 {
			if len(rest) < snapshotTxnSize || rest[0] > 1 {
				return nil, nil, fmt.Errorf("%w: producer snapshot transaction field", record.ErrCorrupt)
			}
			p.inTxn, p.txnFirst, p.coordEpoch = rest[0] == 1, int64(be.Uint64(rest[1:])), int32(be.Uint32(rest[9:]))
			rest = rest[snapshotTxnSize:]
		}
		ps[id] = p
	}
	var aborted []AbortedTxn
	if v2 {
		if len(rest) < 4 {
			return nil, nil, fmt.Errorf("%w: producer snapshot truncated", record.ErrCorrupt)
		}
		k := int(be.Uint32(rest))
		rest = rest[4:]
		if k < 0 || len(rest) != k*abortedEntrySize {
			return nil, nil, fmt.Errorf("%w: producer snapshot: %d aborted transactions in %d bytes", record.ErrCorrupt, k, len(rest))
		}
		for range k {
			aborted = append(aborted, AbortedTxn{
				ProducerID: int64(be.Uint64(rest)), FirstOffset: int64(be.Uint64(rest[8:])),
				LastOffset: int64(be.Uint64(rest[16:])), LastStableOffset: int64(be.Uint64(rest[24:])),
			})
			rest = rest[abortedEntrySize:]
		}
	}
	if len(rest) != 0 {
		return nil, nil, fmt.Errorf("%w: %d trailing bytes in producer snapshot", record.ErrCorrupt, len(rest))
	}
	return ps, aborted, nil
}

// keptSnapshots is how many producer snapshots stay on disk.
const keptSnapshots = 3

// listSnapshots returns the offsets of the snapshot files in dir, ascending.
func listSnapshots(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return snapshotsIn(ents), nil
}

// snapshotsIn is listSnapshots over a listing of the directory.
func snapshotsIn(ents []os.DirEntry) []int64 {
	var offs []int64
	for _, e := range ents {
		if off, ok := parseSegName(e.Name(), snapshotSuffix); ok {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs
}

func snapshotPath(dir string, off int64) string {
	return filepath.Join(dir, segName(off)+snapshotSuffix)
}

// writeSnapshot stores ps as the state at offset end and removes old
// snapshots beyond the newest keptSnapshots.
func writeSnapshot(dir string, end int64, ps producerState, aborted []AbortedTxn, durable bool) error {
	return writeSnapshotData(dir, end, encodeSnapshot(ps, aborted), durable)
}

// writeSnapshotData is writeSnapshot of an encoded snapshot.
func writeSnapshotData(dir string, end int64, data []byte, durable bool) error {
	if err := writeFileAtomic(dir, segName(end)+snapshotSuffix, data, durable); err != nil {
		return err
	}
	offs, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	for len(offs) > keptSnapshots {
		os.Remove(snapshotPath(dir, offs[0]))
		offs = offs[1:]
	}
	return nil
}

// removeSnapshotsAbove deletes snapshots taken after offset end, which
// describe data the log no longer has.
func removeSnapshotsAbove(dir string, end int64) error {
	offs, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	return removeSnapshotsIn(dir, offs, end)
}

// removeSnapshotsIn is removeSnapshotsAbove over the snapshots offs.
func removeSnapshotsIn(dir string, offs []int64, end int64) error {
	for _, off := range offs {
		if off > end {
			if err := os.Remove(snapshotPath(dir, off)); err != nil {
				return fmt.Errorf("log: %w", err)
			}
		}
	}
	return nil
}

// loadLatestSnapshotIn returns the newest readable snapshot at or below
// end among offs (ascending) and its offset, or an empty state and -1
// when there is none.
func loadLatestSnapshotIn(dir string, offs []int64, end int64) (producerState, []AbortedTxn, int64, error) {
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > end {
			continue
		}
		b, err := os.ReadFile(snapshotPath(dir, offs[i]))
		if err != nil {
			continue
		}
		if ps, aborted, err := decodeSnapshot(b); err == nil {
			return ps, aborted, offs[i], nil
		}
	}
	return producerState{}, nil, -1, nil
}
