package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// kv is one record as the tests see it.
type kv struct {
	off       int64
	ts        int64
	value     []byte // nil: tombstone
	tombstone bool
}

// compactConfig is testConfig with compaction on.
func compactConfig() Config {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 16 << 10
	cfg.Compact = true
	cfg.DeleteRetentionMs = 1000
	cfg.MinCleanableDirtyRatio = 0.5
	return cfg
}

var codecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// writeKeyed appends n records over keys distinct keys in batches of per,
// rotating codecs; the value of the record at offset o for key k is
// "k<k>@<o>". It returns the latest record of every key.
func writeKeyed(t testing.TB, l *Log, n, keys, per int, latest map[string]kv) {
	t.Helper()
	for i := 0; i < n; i += per {
		base := l.EndOffset()
		var recs []recordtest.Rec
		for j := 0; j < per && i+j < n; j++ {
			k := fmt.Sprintf("key-%d", (i+j)%keys)
			off := base + int64(j)
			v := fmt.Appendf(nil, "%s@%d", k, off)
			recs = append(recs, recordtest.Rec{Key: []byte(k), Value: v, Timestamp: 1000 + off})
			latest[k] = kv{off: off, ts: 1000 + off, value: v}
		}
		b := recordtest.Batch(codecs[(i/per)%len(codecs)], recs...)
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// readRecords reads the whole log and decodes every record, checking that
// each batch passes record.Validate as an internal batch and that offsets
// increase.
func readRecords(t testing.TB, l *Log) []struct {
	key string
	kv
} {
	t.Helper()
	var out []struct {
		key string
		kv
	}
	raw := readAll(t, l)
	prev := int64(-1)
	for rest := raw; len(rest) > 0; {
		_, b, r, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = r
		if _, err := record.Validate(b, record.ValidateOptions{Internal: true}); err != nil {
			t.Fatalf("stored batch fails validation: %v", err)
		}
		err = record.Records(b, 0, func(rec record.Record) error {
			if rec.Offset <= prev {
				return fmt.Errorf("offset %d after %d", rec.Offset, prev)
			}
			prev = rec.Offset
			out = append(out, struct {
				key string
				kv
			}{string(rec.Key), kv{off: rec.Offset, ts: rec.Timestamp, value: bytes.Clone(rec.Value), tombstone: rec.Value == nil}})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkLatest asserts the log holds exactly one record per key: the
// latest, at its original offset, with its value and timestamp.
func checkLatest(t testing.TB, l *Log, latest map[string]kv) {
	t.Helper()
	got := map[string]kv{}
	for _, r := range readRecords(t, l) {
		if _, dup := got[r.key]; dup {
			t.Fatalf("key %s appears twice (offset %d)", r.key, r.off)
		}
		got[r.key] = r.kv
	}
	if len(got) != len(latest) {
		t.Fatalf("log holds %d keys, want %d", len(got), len(latest))
	}
	for k, want := range latest {
		g := got[k]
		if g.off != want.off || !bytes.Equal(g.value, want.value) || g.ts != want.ts || g.tombstone != want.tombstone {
			t.Fatalf("key %s: got offset %d value %q ts %d, want offset %d value %q ts %d", k, g.off, g.value, g.ts, want.off, want.value, want.ts)
		}
	}
}

// settle makes all data durable and inactive so it is cleanable.
func settle(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestCleanKeepsLatestPerKey(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.SegmentBytes = 256 << 10
	l := openLog(t, dir, cfg)
	latest := map[string]kv{}
	writeKeyed(t, l, 100_000, 1000, 100, latest)
	settle(t, l)
	end, before := l.EndOffset(), l.Size()
	old, err := l.Read(0, 1<<20, end) // a Slice over a segment about to be replaced
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldBytes, _ := old.Bytes(nil)
	st, err := l.Clean(context.Background(), time.Now(), CleanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := old.Bytes(nil); err != nil || !bytes.Equal(got, oldBytes) || len(got) == 0 {
		t.Fatalf("slice opened before cleaning reads %d bytes (%v), want the original %d", len(got), err, len(oldBytes))
	}
	if st.RecordsRead != 100_000 || st.RecordsKept != 1000 || st.Segments < 2 {
		t.Fatalf("stats %+v, want 100000 read, 1000 kept, several segments", st)
	}
	if l.EndOffset() != end || l.StartOffset() != 0 {
		t.Fatalf("offsets moved: start %d end %d, want 0 %d", l.StartOffset(), l.EndOffset(), end)
	}
	if l.Size() >= before/10 {
		t.Fatalf("size %d after cleaning, was %d", l.Size(), before)
	}
	checkLatest(t, l, latest)
	// A second pass finds nothing dirty.
	if st, err := l.Clean(context.Background(), time.Now(), CleanOptions{}); err != nil || st.Segments != 0 {
		t.Fatalf("second pass: %+v %v, want nothing to do", st, err)
	}
	// Clean reopen, then crash recovery over the compacted batches.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	checkLatest(t, l, latest)
	os.Remove(filepath.Join(dir, recoveryPointFile))
	crash(l)
	l = openLog(t, dir, cfg)
	checkLatest(t, l, latest)
	if l.EndOffset() != end {
		t.Fatalf("end %d after recovery, want %d", l.EndOffset(), end)
	}
	// Appends continue after the compacted data.
	writeKeyed(t, l, 10, 1000, 10, latest)
	settle(t, l)
	if _, err := l.Clean(context.Background(), time.Now(), CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	checkLatest(t, l, latest)
}

func TestCleanDirtyRatioAndLag(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 60_000
	l := openLog(t, t.TempDir(), cfg)
	latest := map[string]kv{}
	writeKeyed(t, l, 2000, 50, 50, latest) // timestamps 1000 + offset
	settle(t, l)
	// Records are "new" relative to now=2000 ms: the lag holds them back.
	if st, _ := l.Clean(context.Background(), time.UnixMilli(2000), CleanOptions{}); st.Segments != 0 {
		t.Fatalf("cleaned %d segments inside min.compaction.lag.ms", st.Segments)
	}
	st, err := l.Clean(context.Background(), time.UnixMilli(1_000_000), CleanOptions{})
	if err != nil || st.Segments == 0 {
		t.Fatalf("pass after the lag: %+v %v", st, err)
	}
	checkLatest(t, l, latest)
	// A little new dirty data stays below the 0.5 ratio.
	writeKeyed(t, l, 10, 50, 10, latest)
	settle(t, l)
	if st, _ := l.Clean(context.Background(), time.UnixMilli(1_000_000), CleanOptions{}); st.Segments != 0 {
		t.Fatalf("cleaned below min.cleanable.dirty.ratio: %+v", st)
	}
}

func TestCleanTombstones(t *testing.T) {
	cfg := compactConfig()
	l := openLog(t, t.TempDir(), cfg)
	latest := map[string]kv{}
	writeKeyed(t, l, 500, 20, 25, latest)
	// Delete keys 0-9.
	var recs []recordtest.Rec
	base := l.EndOffset()
	for i := range 10 {
		k := fmt.Sprintf("key-%d", i)
		recs = append(recs, recordtest.Rec{Key: []byte(k), Timestamp: 5000 + int64(i)})
		latest[k] = kv{off: base + int64(i), ts: 5000 + int64(i), tombstone: true}
	}
	if _, err := l.Append(recordtest.Batch(record.CodecZstd, recs...), AppendOptions{LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	settle(t, l)
	ctx := context.Background()
	t0 := time.UnixMilli(100_000)
	if _, err := l.Clean(ctx, t0, CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	// First pass: tombstones kept (delete horizon t0+1000), timestamps intact.
	checkLatest(t, l, latest)
	if _, err := l.Clean(ctx, t0.Add(999*time.Millisecond), CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	checkLatest(t, l, latest)
	// After delete.retention.ms the due horizon alone triggers a pass.
	st, err := l.Clean(ctx, t0.Add(1001*time.Millisecond), CleanOptions{})
	if err != nil || st.Segments == 0 {
		t.Fatalf("pass after the horizon: %+v %v", st, err)
	}
	for i := range 10 {
		delete(latest, fmt.Sprintf("key-%d", i))
	}
	checkLatest(t, l, latest)
}

func TestCleanCompactDeleteRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.RetentionMs = 10_000
	l := openLog(t, t.TempDir(), cfg)
	latest := map[string]kv{}
	writeKeyed(t, l, 3000, 100, 50, latest) // timestamps 1000..3999
	settle(t, l)
	if _, err := l.Clean(context.Background(), time.UnixMilli(5000), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	checkLatest(t, l, latest)
	n, err := l.ApplyRetention(time.UnixMilli(1_000_000), noHW)
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments (%v), want all inactive ones", n, err)
	}
	if l.StartOffset() != l.EndOffset() {
		t.Fatalf("start %d end %d after full retention", l.StartOffset(), l.EndOffset())
	}
}

func TestCleanBoundedKeyMap(t *testing.T) {
	cfg := compactConfig()
	l := openLog(t, t.TempDir(), cfg)
	latest := map[string]kv{}
	writeKeyed(t, l, 20_000, 1000, 100, latest)
	settle(t, l)
	passes, prev := 0, int64(-1)
	for {
		st, err := l.Clean(context.Background(), time.Now(), CleanOptions{MaxKeys: 700, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if st.CleanedTo == prev {
			break
		}
		if st.CleanedTo < prev {
			t.Fatalf("pass %d cleaned to %d after %d", passes, st.CleanedTo, prev)
		}
		prev = st.CleanedTo
		passes++
		if passes > 1000 {
			t.Fatal("cleaning does not converge")
		}
	}
	if passes < 2 {
		t.Fatalf("%d passes with a 700-key map over 1000 keys, want several", passes)
	}
	checkLatest(t, l, latest)
}

func TestCleanKeepsLastProducerBatch(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	p := &recordtest.Producer{ID: 7, Epoch: 0, BaseSequence: 0}
	for i := range 3 {
		b := recordtest.Build(recordtest.Options{Codec: record.CodecLZ4, Producer: p},
			recordtest.Rec{Key: []byte("key-0"), Value: []byte{byte(i)}}, recordtest.Rec{Key: []byte("key-1"), Value: []byte{byte(i)}})
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
		p.BaseSequence += 2
	}
	// Other writers overwrite both keys.
	writeKeyed(t, l, 2, 2, 2, map[string]kv{})
	settle(t, l)
	if _, err := l.Clean(context.Background(), time.Now(), CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var empty, pidBatches int
	raw := readAll(t, l)
	for rest := raw; len(rest) > 0; {
		h, _, r, _ := record.Next(rest)
		rest = r
		if h.ProducerID == 7 {
			pidBatches++
			if h.NumRecords == 0 && h.BaseOffset == 4 && h.LastOffset() == 5 {
				empty++
			}
		}
	}
	if pidBatches != 1 || empty != 1 {
		t.Fatalf("producer 7 has %d batches (%d empty at 4-5), want its last one kept empty", pidBatches, empty)
	}
	// Producer state rebuilt from the log alone still knows the sequence.
	crash(l)
	for _, s := range segmentFiles(t, dir, snapshotSuffix) {
		os.Remove(s)
	}
	l = openLog(t, dir, cfg)
	bad := recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: 7, BaseSequence: 9}}, recordtest.Rec{Key: []byte("a")})
	if _, err := l.Append(bad, AppendOptions{LeaderEpoch: -1}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap after cleaning: %v, want out of order", err)
	}
	good := recordtest.Build(recordtest.Options{Producer: &recordtest.Producer{ID: 7, BaseSequence: 6}}, recordtest.Rec{Key: []byte("a")})
	if _, err := l.Append(good, AppendOptions{LeaderEpoch: -1}); err != nil {
		t.Fatalf("next sequence after cleaning: %v", err)
	}
}

// copyDir copies the regular files of src into a new directory: the state
// a crash at this instant would leave (all writes are fsynced by then).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestCleanCrashAtEachSwapStep(t *testing.T) {
	for _, step := range []string{"cleaned", "swap", "deleted", "renamed"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			cfg := compactConfig()
			cfg.SegmentBytes = 8 << 10
			l := openLog(t, dir, cfg)
			latest := map[string]kv{}
			writeKeyed(t, l, 3000, 40, 20, latest)
			settle(t, l)
			var image string
			errStop := errors.New("stop")
			cleanHook = func(d, s string) error {
				if d == dir && s == step && image == "" {
					image = copyDir(t, dir)
					return errStop
				}
				return nil
			}
			t.Cleanup(func() { cleanHook = nil })
			_, err := l.Clean(context.Background(), time.Now(), CleanOptions{Force: true})
			if !errors.Is(err, errStop) || image == "" {
				t.Fatalf("clean: %v, want the hook's stop at %s", err, step)
			}
			cleanHook = nil
			crash(l)
			r := openLog(t, image, cfg)
			for _, suf := range []string{cleanedSuffix, swapSuffix} {
				if left := segmentFiles(t, image, suf); len(left) > 0 {
					t.Fatalf("files left after recovery: %v", left)
				}
			}
			// Every record still readable is genuine and every key's latest
			// record survived.
			seen := map[string]kv{}
			for _, rec := range readRecords(t, r) {
				if want := fmt.Sprintf("%s@%d", rec.key, rec.off); string(rec.value) != want {
					t.Fatalf("record at %d is %q, want %q", rec.off, rec.value, want)
				}
				seen[rec.key] = rec.kv
			}
			for k, want := range latest {
				if seen[k].off != want.off {
					t.Fatalf("key %s latest at %d, want %d", k, seen[k].off, want.off)
				}
			}
			if _, err := r.Clean(context.Background(), time.Now(), CleanOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			checkLatest(t, r, latest)
		})
	}
}

func TestCleanConcurrentReads(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 8 << 10
	l := openLog(t, t.TempDir(), cfg)
	latest := map[string]kv{}
	writeKeyed(t, l, 2000, 100, 20, latest)
	settle(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := checkGenuine(l); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 10 {
		writeKeyed(t, l, 500, 100, 20, latest)
		settle(t, l)
		if _, err := l.Clean(ctx, time.Now(), CleanOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkLatest(t, l, latest)
}

// checkGenuine reads the log from its start and checks that every record
// is one that was written at that offset and offsets increase.
func checkGenuine(l *Log) error {
	off, end := l.StartOffset(), l.EndOffset()
	for off < end {
		s, err := l.Read(off, 4096, end)
		if err != nil {
			return err
		}
		b, err := s.Bytes(nil)
		s.Close()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			// Everything from off to the end this reader saw may have been
			// compacted away since; the next kept batch lies beyond it.
			if now := l.EndOffset(); now > end {
				end = now
				continue
			}
			return fmt.Errorf("empty read at %d below %d", off, end)
		}
		for rest := b; len(rest) > 0; {
			h, batch, r, err := record.Next(rest)
			if err != nil {
				return err
			}
			rest = r
			err = record.Records(batch, 0, func(rec record.Record) error {
				if rec.Offset < off {
					return fmt.Errorf("record %d before read offset %d", rec.Offset, off)
				}
				if !strings.HasSuffix(string(rec.Value), fmt.Sprintf("@%d", rec.Offset)) {
					return fmt.Errorf("record at %d holds %q", rec.Offset, rec.Value)
				}
				return nil
			})
			if err != nil {
				return err
			}
			off = max(off, h.LastOffset()+1)
		}
	}
	return nil
}

// BenchmarkClean measures cleaning throughput in MB/s of source segments:
// small records in batches rotating all codecs, and 1 KiB values
// uncompressed; 10 versions of every key.
func BenchmarkClean(b *testing.B) {
	b.Run("small-mixed-codecs", func(b *testing.B) { benchClean(b, 200_000, 20_000, 0, true) })
	b.Run("1KiB-none", func(b *testing.B) { benchClean(b, 20_000, 2_000, 1024, false) })
}

func benchClean(b *testing.B, n, keys, valueSize int, mixed bool) {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	tmpl := b.TempDir()
	l, err := Open(tmpl, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if mixed {
		writeKeyed(b, l, n, keys, 100, map[string]kv{})
	} else {
		pad := bytes.Repeat([]byte("x"), valueSize)
		for i := 0; i < n; i += 100 {
			var recs []recordtest.Rec
			for j := range 100 {
				recs = append(recs, recordtest.Rec{Key: fmt.Appendf(nil, "key-%d", (i+j)%keys), Value: pad, Timestamp: int64(i + j)})
			}
			if _, err := l.Append(recordtest.Batch(record.CodecNone, recs...), AppendOptions{LeaderEpoch: -1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	settle(b, l)
	size := l.Size()
	l.Close()
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := copyDir(b, tmpl)
		l, err := Open(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := l.Clean(context.Background(), time.Now(), CleanOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Close()
		b.StartTimer()
	}
}

func TestThrottle(t *testing.T) {
	if err := (*Throttle)(nil).Wait(context.Background(), 1<<30); err != nil {
		t.Fatalf("nil throttle: %v", err)
	}
	th := NewThrottle(1000)
	if err := th.Wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// 10 s worth of bytes: Wait must block, so a cancelled context ends it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := th.Wait(ctx, 10_000); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait beyond the rate returned %v, want the context's error", err)
	}
}

func TestCleanerCompactsInBackground(t *testing.T) {
	cfg := compactConfig()
	l := openLog(t, t.TempDir(), cfg)
	other := openLog(t, t.TempDir(), testConfig(nil)) // delete policy: skipped
	latest := map[string]kv{}
	writeKeyed(t, l, 5000, 100, 50, latest)
	settle(t, l)
	writeKeyed(t, other, 1000, 10, 50, map[string]kv{})
	settle(t, other)
	otherSize := other.Size()
	c := NewCleaner(CleanerConfig{Backoff: time.Hour, IOMaxBytesPerSecond: 1 << 30, DedupeBufferSize: 1 << 20},
		func() []*Log { return []*Log{other, l} })
	c.Start()
	defer c.Close()
	deadline := time.After(30 * time.Second)
	done := func() bool {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.cleaned >= l.segs[len(l.segs)-1].base
	}
	for !done() {
		c.Wake()
		select {
		case <-deadline:
			t.Fatal("the cleaner did not reach the active segment")
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.Close()
	checkLatest(t, l, latest)
	if other.Size() != otherSize {
		t.Fatalf("a delete-policy log changed size: %d -> %d", otherSize, other.Size())
	}
}

// FuzzSplitRecords feeds arbitrary records sections to the cleaner's
// record splitter and rebuilder: errors are fine, panics are not, and a
// section that splits rebuilds to the same bytes.
func FuzzSplitRecords(f *testing.F) {
	f.Add(recordtest.EncodeRecords(0, recordtest.Rec{Key: []byte("k"), Value: []byte("v")}, recordtest.Rec{Key: []byte("t")}), int32(2))
	f.Add([]byte{0x02, 0x00}, int32(1))
	f.Add([]byte{}, int32(0))
	f.Fuzz(func(t *testing.T, data []byte, n int32) {
		if n < 0 || n > 1000 {
			return
		}
		recs, err := splitRecords(nil, data, n)
		if err != nil {
			return
		}
		var out []byte
		for _, r := range recs {
			out = appendRetimed(out, r, 0)
		}
		again, err := splitRecords(nil, out, n)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("rebuilt records do not split: %v", err)
		}
		for i := range recs {
			if !bytes.Equal(again[i].key, recs[i].key) || again[i].offDelta != recs[i].offDelta || again[i].tsDelta != recs[i].tsDelta {
				t.Fatalf("record %d changed in rebuild", i)
			}
		}
	})
}
