package log

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vltava/vltava/core/record"
)

func ents(pairs ...int64) []epochEntry {
	var es []epochEntry
	for i := 0; i < len(pairs); i += 2 {
		es = append(es, epochEntry{epoch: int32(pairs[i]), start: pairs[i+1]})
	}
	return es
}

// TestEndOffsetForEpoch checks OffsetForLeaderEpoch over a cache, one case
// per sentence of KIP-101 (and its KIP-279 refinement) that defines it.
func TestEndOffsetForEpoch(t *testing.T) {
	cache := ents(1, 0, 3, 100, 4, 150, 7, 300)
	const leo = 420
	cases := []struct {
		name      string
		es        []epochEntry
		requested int32
		epoch     int32
		end       int64
	}{
		{"the end offset of an epoch is the start offset of the first epoch larger than it", cache, 3, 3, 150},
		{"the end offset of the first epoch is the start of the second", cache, 1, 1, 100},
		{"for the leader's current epoch the log end offset is returned", cache, 7, 7, leo},
		{"an epoch the leader never had returns the largest smaller epoch and the start of the next", cache, 5, 4, 300},
		{"an epoch between the first two returns the first and the start of the second", cache, 2, 1, 100},
		{"an epoch below every known epoch returns itself and the first known start", cache, 0, 0, 0},
		{"an epoch above the latest is undefined", cache, 8, -1, -1},
		{"an undefined requested epoch is undefined", cache, -1, -1, -1},
		{"an empty cache knows no epoch", nil, 3, -1, -1},
		{"a single epoch ends at the log end", ents(2, 10), 2, 2, leo},
		{"below a single epoch returns its start", ents(2, 10), 1, 1, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, off := endOffsetFor(c.es, c.requested, leo)
			if e != c.epoch || off != c.end {
				t.Fatalf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", c.requested, e, off, c.epoch, c.end)
			}
		})
	}
}

func TestEpochAssign(t *testing.T) {
	cases := []struct {
		name    string
		es      []epochEntry
		epoch   int32
		start   int64
		want    []epochEntry
		changed bool
	}{
		{"the first epoch starts the cache", nil, 0, 0, ents(0, 0), true},
		{"a new leader epoch appends an entry at its first offset", ents(0, 0), 2, 50, ents(0, 0, 2, 50), true},
		{"more batches of the latest epoch change nothing", ents(0, 0, 2, 50), 2, 70, ents(0, 0, 2, 50), false},
		{"an earlier start for the latest epoch replaces it", ents(0, 0, 2, 50), 2, 40, ents(0, 0, 2, 40), true},
		{"a lower epoch removes every entry not below it", ents(0, 0, 2, 50, 3, 60), 1, 70, ents(0, 0, 1, 70), true},
		{"a higher epoch at a lower offset removes the entries at or after that offset", ents(0, 0, 2, 50, 3, 60), 4, 55, ents(0, 0, 2, 50, 4, 55), true},
		{"an undefined epoch is ignored", ents(0, 0), -1, 10, ents(0, 0), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.es)
			got, changed := assignEntries(c.es, c.epoch, c.start)
			if !slices.Equal(got, c.want) || changed != c.changed {
				t.Fatalf("assign(%d, %d) = %v %v, want %v %v", c.epoch, c.start, got, changed, c.want, c.changed)
			}
			if !slices.Equal(c.es, before) {
				t.Fatalf("assign modified its input: %v", c.es)
			}
		})
	}
}

func TestEpochTruncateEntries(t *testing.T) {
	es := ents(1, 0, 3, 100, 4, 150)
	cases := []struct {
		name string
		got  []epochEntry
		want []epochEntry
	}{
		{"truncating the log drops epochs starting at or after the new end", truncateEntriesFromEnd(es, 150), ents(1, 0, 3, 100)},
		{"truncating inside an epoch keeps it", truncateEntriesFromEnd(es, 151), es},
		{"truncating to zero empties the cache", truncateEntriesFromEnd(es, 0), nil},
		{"a moved log start moves the epoch holding it up", truncateEntriesFromStart(es, 120), ents(3, 120, 4, 150)},
		{"a log start on an epoch start drops the earlier ones", truncateEntriesFromStart(es, 100), ents(3, 100, 4, 150)},
		{"a log start below every entry changes nothing", truncateEntriesFromStart(ents(1, 5), 2), ents(1, 5)},
		{"a log start past the last start keeps the latest epoch", truncateEntriesFromStart(es, 900), ents(4, 900)},
	}
	for _, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestLeaderEpochCheckpointFormat(t *testing.T) {
	es := ents(0, 0, 2, 150, 5, 420)
	b := encodeLeaderEpochs(es)
	if want := "0\n3\n0 0\n2 150\n5 420\n"; string(b) != want {
		t.Fatalf("encoded %q, want %q", b, want)
	}
	got, err := decodeLeaderEpochs(b)
	if err != nil || !slices.Equal(got, es) {
		t.Fatalf("decode = %v, %v", got, err)
	}
	if got, err := decodeLeaderEpochs([]byte("0\n0\n")); err != nil || len(got) != 0 {
		t.Fatalf("empty checkpoint = %v, %v", got, err)
	}
	for _, bad := range []string{
		"", "0\n", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 0", "0\n1\n0  0\n", "0\n1\nx 0\n",
		"0\n1\n-1 0\n", "0\n2\n3 10\n2 20\n", "0\n2\n2 10\n3 10\n", "0\n-1\n",
	} {
		if _, err := decodeLeaderEpochs([]byte(bad)); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("decode %q: %v, want ErrCorrupt", bad, err)
		}
	}
}

func FuzzDecodeLeaderEpochs(f *testing.F) {
	f.Add([]byte("0\n3\n0 0\n2 150\n5 420\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n1\n99999999999 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := decodeLeaderEpochs(b)
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("error not corruption: %v", err)
			}
			return
		}
		again, err := decodeLeaderEpochs(encodeLeaderEpochs(es))
		if err != nil || !slices.Equal(again, es) {
			t.Fatalf("round trip of %v: %v %v", es, again, err)
		}
	})
}

// appendEpoch appends a batch as a leader in epoch.
func appendEpoch(t *testing.T, l *Log, epoch int32, o batchOpts) AppendResult {
	t.Helper()
	res, err := l.Append(makeBatch(o), AppendOptions{LeaderEpoch: epoch})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func checkEpochs(t *testing.T, l *Log, want []epochEntry) {
	t.Helper()
	if got := l.epochs.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("epoch cache %v, want %v", got, want)
	}
	file, err := readLeaderEpochs(l.Dir())
	if err != nil || !slices.Equal(file, want) {
		t.Fatalf("epoch checkpoint %v (%v), want %v", file, err, want)
	}
}

func TestLeaderAppendRecordsEpochs(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(nil))
	appendEpoch(t, l, 0, plain(3, 10, 1))
	appendEpoch(t, l, 0, plain(2, 10, 2))
	if err := l.AssignEpochStart(2, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	appendEpoch(t, l, 2, plain(4, 10, 3))
	checkEpochs(t, l, ents(0, 0, 2, 5))
	if e, ok := l.LatestEpoch(); !ok || e != 2 {
		t.Fatalf("LatestEpoch = %d %v", e, ok)
	}
	for _, c := range []struct {
		req, e int32
		off    int64
	}{{0, 0, 5}, {1, 0, 5}, {2, 2, 9}, {3, -1, -1}} {
		if e, off := l.EndOffsetForEpoch(c.req); e != c.e || off != c.off {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", c.req, e, off, c.e, c.off)
		}
	}
	if err := l.AssignEpochStart(3, l.EndOffset()+1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("assign past the log end: %v", err)
	}
	// Appends without a leader epoch (tests, legacy callers) leave it.
	appendBatch(t, l, nil, plain(1, 10, 4))
	checkEpochs(t, l, ents(0, 0, 2, 5))
}

// leaderBytes returns the whole log's bytes.
func leaderBytes(t *testing.T, l *Log) []byte { return readAll(t, l) }

func TestAppendReplica(t *testing.T) {
	leader := openLog(t, t.TempDir(), testConfig(nil))
	appendEpoch(t, leader, 1, batchOpts{n: 2, valueSize: 20, ts: 1, pid: 7, epoch: 0, seq: 0})
	appendEpoch(t, leader, 1, plain(3, 400, 2))
	appendEpoch(t, leader, 3, batchOpts{n: 2, valueSize: 20, ts: 3, pid: 7, epoch: 0, seq: 2})
	for range 20 { // enough to roll the follower's segments
		appendEpoch(t, leader, 3, plain(2, 300, 4))
	}
	data := leaderBytes(t, leader)

	dir := t.TempDir()
	f := openLog(t, dir, testConfig(nil))
	// Feed it in pieces, as fetches do.
	var pieces [][]byte
	for rest := data; len(rest) > 0; {
		_, b, r, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		if len(pieces) > 0 && len(pieces[len(pieces)-1]) < 1000 {
			pieces[len(pieces)-1] = append(pieces[len(pieces)-1], b...)
		} else {
			pieces = append(pieces, slices.Clone(b))
		}
		rest = r
	}
	for _, p := range pieces {
		last, err := f.AppendReplica(p)
		if err != nil {
			t.Fatalf("AppendReplica: %v", err)
		}
		if last != f.EndOffset()-1 {
			t.Fatalf("last offset %d, log end %d", last, f.EndOffset())
		}
	}
	if got := readAll(t, f); string(got) != string(data) {
		t.Fatalf("follower bytes differ from the leader's (%d vs %d bytes)", len(got), len(data))
	}
	if len(segmentFiles(t, dir, ".log")) < 2 {
		t.Fatal("follower never rolled a segment")
	}
	checkEpochs(t, f, ents(1, 0, 3, 5))

	t.Run("rejects overlapping offsets", func(t *testing.T) {
		end := f.EndOffset()
		if _, err := f.AppendReplica(pieces[len(pieces)-1]); !errors.Is(err, ErrUnexpectedOffset) {
			t.Fatalf("re-append: %v, want ErrUnexpectedOffset", err)
		}
		if f.EndOffset() != end {
			t.Fatal("failed append moved the log end")
		}
	})
	t.Run("rejects a bad CRC", func(t *testing.T) {
		b := makeBatch(plain(1, 10, 5))
		record.SetBaseOffset(b, f.EndOffset())
		b[len(b)-1] ^= 0xff
		if _, err := f.AppendReplica(b); !errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("bad crc: %v, want ErrCorrupt", err)
		}
	})
	t.Run("accepts a compacted gap", func(t *testing.T) {
		b := makeBatch(plain(1, 10, 5))
		record.SetBaseOffset(b, f.EndOffset()+10)
		record.SetCRC(b)
		last, err := f.AppendReplica(b)
		if err != nil || last != f.EndOffset()-1 {
			t.Fatalf("gap: last %d err %v, end %d", last, err, f.EndOffset())
		}
	})
	t.Run("dedup survives a leader change", func(t *testing.T) {
		// The follower becomes leader; the producer retries its last batch.
		res, err := f.Append(makeBatch(batchOpts{n: 2, valueSize: 20, ts: 3, pid: 7, epoch: 0, seq: 2}), AppendOptions{LeaderEpoch: 4})
		if err != nil || !res.Duplicate || res.BaseOffset != 5 {
			t.Fatalf("retry on the new leader: %+v %v, want duplicate at 5", res, err)
		}
		_, err = f.Append(makeBatch(batchOpts{n: 1, valueSize: 20, ts: 3, pid: 7, epoch: 0, seq: 9}), AppendOptions{LeaderEpoch: 4})
		if !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("sequence gap on the new leader: %v", err)
		}
	})
}

func TestTruncateTrimsEpochsAndProducers(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	appendEpoch(t, l, 1, batchOpts{n: 2, valueSize: 20, ts: 1, pid: 7, epoch: 0, seq: 0})
	for range 15 {
		appendEpoch(t, l, 1, plain(2, 300, 2))
	}
	cut := l.EndOffset()
	appendEpoch(t, l, 2, batchOpts{n: 2, valueSize: 20, ts: 3, pid: 7, epoch: 0, seq: 2})
	appendEpoch(t, l, 3, plain(2, 300, 2))
	checkEpochs(t, l, ents(1, 0, 2, cut, 3, cut+2))
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, ents(1, 0))
	if e, off := l.EndOffsetForEpoch(1); e != 1 || off != cut {
		t.Fatalf("EndOffsetForEpoch(1) after truncate = (%d, %d), want (1, %d)", e, off, cut)
	}
	// The truncated batch is gone from producer state: its retry is new
	// data, and the one before it is still a duplicate.
	res, err := l.Append(makeBatch(batchOpts{n: 2, valueSize: 20, ts: 3, pid: 7, epoch: 0, seq: 2}), AppendOptions{LeaderEpoch: 4})
	if err != nil || res.Duplicate || res.BaseOffset != cut {
		t.Fatalf("append of the truncated batch: %+v %v", res, err)
	}
	res, err = l.Append(makeBatch(batchOpts{n: 2, valueSize: 20, ts: 1, pid: 7, epoch: 0, seq: 0}), AppendOptions{LeaderEpoch: 4})
	if err != nil || !res.Duplicate || res.BaseOffset != 0 {
		t.Fatalf("retry of a kept batch: %+v %v", res, err)
	}
	checkEpochs(t, l, ents(1, 0, 4, cut))
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	appendEpoch(t, l, 1, batchOpts{n: 2, valueSize: 20, ts: 1, pid: 7, epoch: 0, seq: 0})
	for range 15 {
		appendEpoch(t, l, 1, plain(2, 300, 2))
	}
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 1000 || l.EndOffset() != 1000 {
		t.Fatalf("offsets %d..%d, want 1000..1000", l.StartOffset(), l.EndOffset())
	}
	checkEpochs(t, l, nil)
	if snaps, _ := listSnapshots(dir); len(snaps) != 0 {
		t.Fatalf("snapshots left: %v", snaps)
	}
	res, err := l.Append(makeBatch(batchOpts{n: 2, valueSize: 20, ts: 1, pid: 7, epoch: 0, seq: 0}), AppendOptions{LeaderEpoch: 2})
	if err != nil || res.Duplicate || res.BaseOffset != 1000 {
		t.Fatalf("append after restart: %+v %v", res, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, testConfig(nil))
	if l2.StartOffset() != 1000 || l2.EndOffset() != 1002 {
		t.Fatalf("reopened offsets %d..%d", l2.StartOffset(), l2.EndOffset())
	}
	checkEpochs(t, l2, ents(2, 1000))
}

func TestEpochRecovery(t *testing.T) {
	build := func(t *testing.T) (string, int64) {
		dir := t.TempDir()
		l := openLog(t, dir, testConfig(nil))
		appendEpoch(t, l, 0, plain(3, 300, 1))
		appendEpoch(t, l, 2, plain(3, 300, 1))
		mid := l.EndOffset()
		appendEpoch(t, l, 5, plain(3, 300, 1))
		appendEpoch(t, l, 5, plain(3, 300, 1))
		crash(l)
		return dir, mid
	}
	write := func(t *testing.T, dir, s string) {
		if err := os.WriteFile(filepath.Join(dir, leaderEpochFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []epochEntry
	}{
		{"an intact checkpoint is kept", func(*testing.T, string) {}, ents(0, 0, 2, 3, 5, 6)},
		{"a missing checkpoint is rebuilt from the batch headers", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, leaderEpochFile))
		}, ents(0, 0, 2, 3, 5, 6)},
		{"a corrupt checkpoint is rebuilt from the batch headers", func(t *testing.T, dir string) {
			write(t, dir, "0\n3\n0 0\n")
		}, ents(0, 0, 2, 3, 5, 6)},
		{"entries past a lost tail are dropped", func(t *testing.T, dir string) {
			write(t, dir, "0\n4\n0 0\n2 3\n5 6\n7 12\n")
		}, ents(0, 0, 2, 3, 5, 6)},
		{"a torn tail takes its epochs with it", func(t *testing.T, dir string) {
			logs := segmentFiles(t, dir, ".log")
			// Cut into the first epoch-5 batch: recovery truncates there.
			path := logs[len(logs)-1]
			if err := os.Truncate(path, fileSize(t, path)-int64(len(makeBatch(plain(3, 300, 1))))-100); err != nil {
				t.Fatal(err)
			}
		}, ents(0, 0, 2, 3)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := build(t)
			c.damage(t, dir)
			l := openLog(t, dir, testConfig(nil))
			checkEpochs(t, l, c.want)
		})
	}
}

func TestRetentionMovesFirstEpoch(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig(nil))
	appendEpoch(t, l, 0, plain(3, 300, 1))
	appendEpoch(t, l, 2, plain(3, 300, 1))
	appendEpoch(t, l, 2, plain(3, 300, 1))
	if _, err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, ents(2, 4))
	if e, off := l.EndOffsetForEpoch(0); e != 0 || off != 4 {
		t.Fatalf("EndOffsetForEpoch(0) below the log start = (%d, %d), want (0, 4)", e, off)
	}
}

// TestEpochAtLogEndWrittenWithFirstBatch: a leader taking over at its log
// end (every new partition) writes no checkpoint; the epoch's first batch
// writes it before the data, and a crash in between loses nothing Open
// would keep.
func TestEpochAtLogEndWrittenWithFirstBatch(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig(nil))
	if err := l.AssignEpochStart(3, 0); err != nil {
		t.Fatal(err)
	}
	if got := l.epochs.snapshot(); !slices.Equal(got, ents(3, 0)) {
		t.Fatalf("epoch cache %v, want %v", got, ents(3, 0))
	}
	if _, err := os.Stat(filepath.Join(dir, leaderEpochFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint after taking over an empty log: %v, want none", err)
	}
	appendEpoch(t, l, 3, plain(2, 10, 1))
	if es, err := readLeaderEpochs(dir); err != nil || !slices.Equal(es, ents(3, 0)) {
		t.Fatalf("checkpoint after the first batch = %v, %v; want %v", es, err, ents(3, 0))
	}
	// A later epoch at the log end, then a crash before its first batch.
	if err := l.AssignEpochStart(5, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	if got := l.epochs.snapshot(); !slices.Equal(got, ents(3, 0, 5, 2)) {
		t.Fatalf("epoch cache %v, want %v", got, ents(3, 0, 5, 2))
	}
	if es, _ := readLeaderEpochs(dir); !slices.Equal(es, ents(3, 0)) {
		t.Fatalf("checkpoint before epoch 5's first batch = %v, want %v", es, ents(3, 0))
	}
	crash(l)
	l = openLog(t, dir, testConfig(nil))
	checkEpochs(t, l, ents(3, 0))
	// An epoch at the log end that replaces a later entry is written at
	// once.
	if err := l.AssignEpochStart(4, 0); err != nil {
		t.Fatal(err)
	}
	if es, _ := readLeaderEpochs(dir); !slices.Equal(es, ents(4, 0)) {
		t.Fatalf("checkpoint after reassigning from offset 0 = %v, want %v", es, ents(4, 0))
	}
}
