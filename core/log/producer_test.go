package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"testing"
)

func idem(pid int64, epoch int16, seq int32, n int) batchOpts {
	return batchOpts{n: n, valueSize: 20, ts: 1000, pid: pid, epoch: epoch, seq: seq}
}

func appendErr(l *Log, o batchOpts) (AppendResult, error) {
	return l.Append(makeBatch(o), AppendOptions{LeaderEpoch: -1})
}

func TestIdempotentProducer(t *testing.T) {
	for _, restart := range []string{"none", "close", "crash", "crash without snapshots"} {
		t.Run(restart, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(nil)
			l := openLog(t, dir, cfg)
			var m model
			var first []AppendResult
			for i := range 7 { // more than the 5 cached batches
				first = append(first, appendBatch(t, l, &m, idem(7, 0, int32(3*i), 3)))
				appendBatch(t, l, &m, plain(2, 300, 1)) // interleaved, rolls segments
			}
			switch restart {
			case "close":
				l.Close()
				l = openLog(t, dir, cfg)
			case "crash":
				crash(l)
				l = openLog(t, dir, cfg)
			case "crash without snapshots":
				crash(l)
				for _, p := range segmentFiles(t, dir, snapshotSuffix) {
					os.Remove(p)
				}
				l = openLog(t, dir, cfg)
			}
			end := l.EndOffset()
			// Retries of the last five batches are duplicates with their offsets.
			for i := 2; i < 7; i++ {
				res, err := appendErr(l, idem(7, 0, int32(3*i), 3))
				if err != nil || !res.Duplicate || res.BaseOffset != first[i].BaseOffset || res.LastOffset != first[i].LastOffset {
					t.Fatalf("retry of batch %d: %+v %v, want duplicate at %d", i, res, err, first[i].BaseOffset)
				}
			}
			if l.EndOffset() != end {
				t.Fatal("a duplicate was appended")
			}
			// Too old to be cached: out of order.
			if _, err := appendErr(l, idem(7, 0, 0, 3)); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("retry of evicted batch: %v", err)
			}
			// A gap.
			if _, err := appendErr(l, idem(7, 0, 22, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("gap: %v", err)
			}
			// In order continues.
			if res, err := appendErr(l, idem(7, 0, 21, 2)); err != nil || res.Duplicate || res.BaseOffset != end {
				t.Fatalf("next sequence: %+v %v", res, err)
			}
			// A new epoch must start at 0; then the old epoch is fenced.
			if _, err := appendErr(l, idem(7, 1, 5, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("new epoch at sequence 5: %v", err)
			}
			if _, err := appendErr(l, idem(7, 1, 0, 1)); err != nil {
				t.Fatalf("new epoch at 0: %v", err)
			}
			if _, err := appendErr(l, idem(7, 0, 23, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
				t.Fatalf("fenced epoch: %v", err)
			}
			// An unknown producer may start anywhere.
			if _, err := appendErr(l, idem(8, 3, 1000, 1)); err != nil {
				t.Fatalf("unknown producer: %v", err)
			}
			if !bytes.Equal(readAll(t, l)[:len(m.bytesFrom(0))], m.bytesFrom(0)) {
				t.Fatal("log content changed")
			}
		})
	}
}

func TestSequenceWrap(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(nil))
	if _, err := appendErr(l, idem(1, 0, math.MaxInt32-1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := appendErr(l, idem(1, 0, 0, 1)); err != nil {
		t.Fatalf("sequence after MaxInt32: %v", err)
	}
	if got := lastSequence(math.MaxInt32-1, 3); got != 1 {
		t.Fatalf("lastSequence wraps to %d, want 1", got)
	}
}

func TestSnapshotRoundtrip(t *testing.T) {
	ps := producerState{
		1: {epoch: 2, batches: []seqBatch{{0, 4, 10, 14}, {5, 5, 20, 20}}},
		9: {epoch: 0, inTxn: true, txnFirst: 30},
	}
	aborted := []AbortedTxn{{ProducerID: 4, FirstOffset: 1, LastOffset: 7, LastStableOffset: 8}}
	b := encodeSnapshot(ps, aborted)
	got, gotAborted, err := decodeSnapshot(b)
	if err != nil || len(got) != 2 || got[1].epoch != 2 || got[1].batches[1] != ps[1].batches[1] || got[9] == nil ||
		!got[9].inTxn || got[9].txnFirst != 30 || len(gotAborted) != 1 || gotAborted[0] != aborted[0] {
		t.Fatalf("roundtrip: %+v %+v %v", got, gotAborted, err)
	}
	b[len(b)-1] ^= 1
	if _, _, err := decodeSnapshot(b); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(producerState{1: {epoch: 2, batches: []seqBatch{{0, 4, 10, 14}}, inTxn: true, txnFirst: 3}}, []AbortedTxn{{1, 2, 3, 4}}))
	f.Add([]byte("VLPS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, aborted, err := decodeSnapshot(b)
		if err == nil && b[4] == snapshotVersion && !bytes.Equal(encodeSnapshot(ps, aborted), b) {
			t.Fatal("accepted snapshot does not re-encode identically")
		}
	})
}
