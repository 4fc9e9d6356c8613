package log

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

func txnBatch(pid int64, seq int32, n int) []byte {
	recs := make([]recordtest.Rec, n)
	for i := range recs {
		recs[i] = recordtest.Rec{Value: []byte("v"), Timestamp: 1}
	}
	return recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: pid, BaseSequence: seq}, Transactional: true}, recs...)
}

func mustAppend(t *testing.T, l *Log, b []byte) AppendResult {
	t.Helper()
	res, err := l.Append(b, AppendOptions{LeaderEpoch: -1})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

// TestTxnLastStableOffsetAndAborted: open transactions hold back the last
// stable offset; markers release it; an ABORT is indexed with the
// transaction's first offset; all of it survives a clean reopen and a
// crash (rebuilt from the snapshot and the log).
func TestTxnLastStableOffsetAndAborted(t *testing.T) {
	for _, mode := range []string{"close", "crash"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig(nil))
			mustAppend(t, l, makeBatch(plain(2, 10, 1))) // 0-1, not transactional
			mustAppend(t, l, txnBatch(7, 0, 3))          // 2-4, producer 7 opens
			mustAppend(t, l, txnBatch(8, 0, 1))          // 5, producer 8 opens
			if got := l.LastStableOffset(100); got != 2 {
				t.Fatalf("LSO with 7 and 8 open = %d, want 2", got)
			}
			if got := l.LastStableOffset(1); got != 1 {
				t.Fatalf("LSO capped by the HW = %d, want 1", got)
			}
			off, err := l.AppendMarker(7, 0, false, 0, -1, 1) // 6: abort 7
			if err != nil || off != 6 {
				t.Fatalf("abort marker at %d, %v; want 6", off, err)
			}
			if got := l.LastStableOffset(100); got != 5 {
				t.Fatalf("LSO with 8 open = %d, want 5", got)
			}
			mustAppend(t, l, txnBatch(7, 3, 1))                             // 7: producer 7's next transaction
			if _, err := l.AppendMarker(8, 0, true, 0, -1, 1); err != nil { // 8: commit 8
				t.Fatal(err)
			}
			if _, err := l.AppendMarker(7, 0, false, 0, -1, 1); err != nil { // 9: abort 7
				t.Fatal(err)
			}
			want := []AbortedTxn{{7, 2, 6, 5}, {7, 7, 9, 10}}
			check := func(l *Log) {
				t.Helper()
				if got := l.LastStableOffset(100); got != 100 {
					t.Fatalf("LSO with nothing open = %d, want the HW", got)
				}
				if diff := cmp.Diff(want, l.AbortedTxns(0, 100)); diff != "" {
					t.Fatalf("aborted (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want[1:], l.AbortedTxns(7, 100)); diff != "" {
					t.Fatalf("aborted from 7 (-want +got):\n%s", diff)
				}
				if got := l.AbortedTxns(0, 2); len(got) != 0 {
					t.Fatalf("aborted below 2: %+v", got)
				}
			}
			check(l)
			mustAppend(t, l, txnBatch(8, 1, 1)) // 10: 8 opens again
			if mode == "close" {
				l.Close()
			} else {
				crash(l)
			}
			l2 := openLog(t, dir, testConfig(nil))
			check2 := l2.LastStableOffset(100)
			if check2 != 10 {
				t.Fatalf("LSO after reopen = %d, want 10 (producer 8's open transaction)", check2)
			}
			if diff := cmp.Diff(want, l2.AbortedTxns(0, 100)); diff != "" {
				t.Fatalf("aborted after reopen (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarkerBatchControlType(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := record.MarkerBatch(5, 3, commit, 9, 1000)
		h, err := record.ParseHeader(b)
		if err == nil {
			err = record.CheckCRC(b)
		}
		if err == nil && h.Size() != len(b) {
			t.Fatalf("batch length %d, have %d", h.Size(), len(b))
		}
		if err != nil {
			t.Fatalf("marker does not validate: %v", err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 5 || h.ProducerEpoch != 3 || h.NumRecords != 1 {
			t.Fatalf("marker header %+v", h)
		}
		ctl, err := record.ControlType(b)
		want := record.ControlAbort
		if commit {
			want = record.ControlCommit
		}
		if err != nil || ctl != want {
			t.Fatalf("ControlType = %d, %v; want %d", ctl, err, want)
		}
	}
}

// TestTxnMarkerCoordinatorFenced: once a marker of coordinator epoch 5 is
// in, a late marker of epoch 4 (a deposed coordinator's) is refused and
// does not end the producer's next transaction, also after a reopen.
func TestTxnMarkerCoordinatorFenced(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	mustAppend(t, l, txnBatch(7, 0, 1))
	if _, err := l.AppendMarker(7, 0, true, 5, -1, 1); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, txnBatch(7, 1, 1)) // the producer's next transaction, at 2
	if _, err := l.AppendMarker(7, 0, true, 4, -1, 1); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator: %v, want ErrCoordinatorFenced", err)
	}
	if lso := l.LastStableOffset(100); lso != 2 {
		t.Fatalf("LSO %d, want 2: the open transaction was ended by a fenced marker", lso)
	}
	l.Close()
	l2 := openLog(t, dir, testConfig(nil))
	if _, err := l2.AppendMarker(7, 0, false, 4, -1, 1); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("after reopen, marker of an older coordinator: %v", err)
	}
	if _, err := l2.AppendMarker(7, 0, true, 5, -1, 1); err != nil {
		t.Fatalf("marker of the current coordinator: %v", err)
	}
	if lso := l2.LastStableOffset(100); lso != 100 {
		t.Fatalf("LSO %d after the commit", lso)
	}
}

// TestTxnCleanerKeepsCommittedUnderAborted: on a compacted log a key's
// committed record is not removed because an aborted transaction wrote the
// key later (it would vanish for read_committed consumers), and the
// cleaner stops below an open transaction.
func TestTxnCleanerKeepsCommittedUnderAborted(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 10
	l := openLog(t, t.TempDir(), cfg)
	val := make([]byte, 300)
	mustAppend(t, l, recordtest.Batch(record.CodecNone, recordtest.Rec{Key: []byte("k"), Value: []byte("committed"), Timestamp: 1}))
	aborted := recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: 7}, Transactional: true},
		recordtest.Rec{Key: []byte("k"), Value: []byte("aborted"), Timestamp: 1})
	mustAppend(t, l, aborted)
	if _, err := l.AppendMarker(7, 0, false, 0, -1, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 12 { // roll segments so the records above can be cleaned
		mustAppend(t, l, recordtest.Batch(record.CodecNone, recordtest.Rec{Key: fmt.Appendf(nil, "f%d", i), Value: val, Timestamp: 1}))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), time.Now(), CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, r := range readRecords(t, l) {
		if r.key == "k" {
			vals = append(vals, string(r.value))
		}
	}
	if !slices.Contains(vals, "committed") {
		t.Fatalf("key k after cleaning: %q; the committed record was removed under an aborted one", vals)
	}
}

// TestTxnCleanerRemovesAbortedAndMarkers: compaction of transactional
// data, as Kafka's cleaner does it. An aborted transaction's records go
// at once; a marker stays while any batch of its transaction is in the
// log, and once none is it gets a delete horizon (delete.retention.ms)
// and goes in a pass after it. Afterwards the log holds exactly the
// latest committed record of every key, read_committed and
// read_uncommitted alike, no transaction is open (also after producer
// state is rebuilt from the log alone), and every kept marker still
// follows data of its producer or is the producer's last batch.
func TestTxnCleanerRemovesAbortedAndMarkers(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 10
	cfg.DeleteRetentionMs = 1000
	l := openLog(t, dir, cfg)
	seqs := map[int64]int32{}
	txn := func(pid int64, commit bool, kvs ...string) {
		t.Helper()
		var recs []recordtest.Rec
		for i := 0; i < len(kvs); i += 2 {
			recs = append(recs, recordtest.Rec{Key: []byte(kvs[i]), Value: []byte(kvs[i+1]), Timestamp: 1})
		}
		mustAppend(t, l, recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: pid, BaseSequence: seqs[pid]}, Transactional: true}, recs...))
		seqs[pid] += int32(len(recs))
		if _, err := l.AppendMarker(pid, 0, commit, 0, -1, 1); err != nil {
			t.Fatal(err)
		}
	}
	plain := func(k, v string) {
		mustAppend(t, l, recordtest.Batch(record.CodecNone, recordtest.Rec{Key: []byte(k), Value: []byte(v), Timestamp: 1}))
	}
	plain("k1", "plain1")
	txn(7, true, "k1", "c7", "k2", "c7")  // k1 survives: its marker stays
	txn(8, false, "k1", "a8", "k3", "a8") // aborted: data goes, then the marker
	txn(9, true, "k2", "c9")              // k2's latest
	txn(10, true, "k4", "c10")            // superseded below: marker goes
	plain("k4", "plain4")
	txn(8, true, "k5", "c8")   // producers 8 and 10 write again, so their
	txn(10, true, "k6", "c10") // earlier markers are not their last batches
	val := make([]byte, 300)
	for i := range 12 { // roll segments so all of the above is cleanable
		plain(fmt.Sprintf("f%d", i), string(val))
	}
	settle(t, l)
	want := map[string]string{"k1": "c7", "k2": "c9", "k4": "plain4", "k5": "c8", "k6": "c10"}
	type marker struct {
		pid     int64
		horizon bool
	}
	scan := func() (map[string]string, []marker) {
		t.Helper()
		got := map[string]string{}
		var ms []marker
		for rest := readAll(t, l); len(rest) > 0; {
			h, b, r, err := record.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			rest = r
			if h.Control() {
				_, hz := hasHorizon(h)
				ms = append(ms, marker{h.ProducerID, hz})
				continue
			}
			if err := record.Records(b, 0, func(rec record.Record) error {
				if k := string(rec.Key); k[0] == 'k' {
					if _, dup := got[k]; dup {
						return fmt.Errorf("key %s twice", k)
					}
					got[k] = string(rec.Value)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		return got, ms
	}
	now := time.Now()
	if _, err := l.Clean(context.Background(), now, CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	got, ms := scan()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("after the first pass (-want +got):\n%s", diff)
	}
	wantMarkers := []marker{{7, false}, {8, true}, {9, false}, {10, true}, {8, false}, {10, false}}
	if diff := cmp.Diff(wantMarkers, ms, cmp.AllowUnexported(marker{})); diff != "" {
		t.Fatalf("markers after the first pass (-want +got):\n%s", diff)
	}
	if ab := l.AbortedTxns(0, math.MaxInt64); len(ab) != 1 || ab[0].ProducerID != 8 {
		t.Fatalf("aborted index after the first pass: %+v, want producer 8's transaction", ab)
	}
	if _, err := l.Clean(context.Background(), now.Add(2*time.Second), CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if ab := l.AbortedTxns(0, math.MaxInt64); len(ab) != 0 {
		t.Fatalf("aborted index after its marker went: %+v, want empty (a read_committed reader would skip producer 8 from there on)", ab)
	}
	got, ms = scan()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("after the horizon (-want +got):\n%s", diff)
	}
	wantMarkers = []marker{{7, false}, {9, false}, {8, false}, {10, false}}
	if diff := cmp.Diff(wantMarkers, ms, cmp.AllowUnexported(marker{})); diff != "" {
		t.Fatalf("markers after the horizon (-want +got):\n%s", diff)
	}
	if off, open := l.FirstUnstableOffset(); open {
		t.Fatalf("a transaction is open at %d after cleaning", off)
	}
	// Producer state rebuilt from the cleaned log alone.
	crash(l)
	for _, s := range segmentFiles(t, dir, snapshotSuffix) {
		os.Remove(s)
	}
	l = openLog(t, dir, cfg)
	if off, open := l.FirstUnstableOffset(); open {
		t.Fatalf("a transaction is open at %d after rebuilding producer state from the cleaned log", off)
	}
	if lso, end := l.LastStableOffset(l.EndOffset()), l.EndOffset(); lso != end {
		t.Fatalf("last stable offset %d, log end %d", lso, end)
	}
}
