package log

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Retained-data benchmarks (issue 15, targets 5 and 6): what Open and the
// per-request and per-tick paths cost as a log holds more bytes and more
// segments. Each case writes its log first (up to 1 GiB in the temporary
// directory), so they run only with VLTAVA_RETAINED_BENCH=1:
//
//	VLTAVA_RETAINED_BENCH=1 go test -run '^$' -bench 'Retained' -benchtime 20x ./core/log/
//
// Case names are bytes/segments: 1GiB/1seg .. 1GiB/1000seg hold the bytes
// fixed and vary the segment count (segment.bytes = bytes / segments),
// 10MiB/10seg .. 1GiB/10seg hold the segment count fixed and vary the
// bytes. 64 KiB batches of 1 KiB records, index.interval.bytes
// 4096 (every batch indexed), as `perf produce` writes them at most.
var retainedCases = []struct {
	name        string
	total, segs int64
}{
	{"1GiB/1seg", 1 << 30, 1},
	{"1GiB/100seg", 1 << 30, 100},
	{"1GiB/1000seg", 1 << 30, 1000},
	{"10MiB/10seg", 10 << 20, 10},
	{"100MiB/10seg", 100 << 20, 10},
	{"1GiB/10seg", 1 << 30, 10},
}

func retainedBench(b *testing.B) {
	if os.Getenv("VLTAVA_RETAINED_BENCH") == "" {
		b.Skip("writes up to 1 GiB per case: set VLTAVA_RETAINED_BENCH=1")
	}
}

func retainedConfig(segBytes int64) Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// fillRetained appends 64 KiB batches to a new log in dir until it holds
// total bytes in about segs segments, and flushes it with Maintain.
func fillRetained(b *testing.B, dir string, total, segs int64) (*Log, Config) {
	batch := makeBatch(plain(64, 1000, time.Now().UnixMilli()))
	segBytes := max(total/segs, int64(len(batch)))
	// A segment rolls before the batch that would exceed segment.bytes:
	// round up to whole batches so each holds total/segs bytes.
	segBytes = (segBytes + int64(len(batch)) - 1) / int64(len(batch)) * int64(len(batch))
	cfg := retainedConfig(segBytes)
	l, err := Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for n := int64(0); n < total; n += int64(len(batch)) {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 0}); err != nil {
			b.Fatal(err)
		}
	}
	// Flushed as a broker's Maintain tick flushes with flush.ms set (on
	// a roll only with the defaults).
	cfg.FlushMs = 1000
	l.SetConfig(cfg)
	if err := l.Maintain(time.Now().Add(time.Minute), math.MaxInt64); err != nil {
		b.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	return l, cfg
}

// BenchmarkRetained writes each case's log once and times, on it:
//
//   - open-crashed: Open after a crash (the process killed, the page cache
//     kept) of a log whose data was all flushed: no clean-shutdown
//     marker, the recovery point at the log end, the producer snapshots
//     Maintain's flush and the rolls left. Every iteration starts from the same files: what
//     Open wrote (marker, snapshot, checkpoints, rewritten indexes) is
//     put back as the crash left it, outside the timer.
//   - open-clean: Open and Close of the log closed cleanly (a Close after
//     an Open that changed nothing writes nothing): the broker's restart.
//   - read-tail, append, maintain, size: what a serving partition does
//     per request and per tick: a fetch of the last 1,024 records, a
//     64 KiB append, Maintain (the broker's once-a-second tick) and Size
//     (metrics, DescribeLogDirs).
func BenchmarkRetained(b *testing.B) {
	retainedBench(b)
	for _, c := range retainedCases {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			l, cfg := fillRetained(b, dir, c.total, c.segs)
			crash(l)
			saved := saveSmallFiles(b, dir)
			segs := len(segmentFiles(b, dir, logSuffix))
			b.Run("open-crashed", func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					restoreSmallFiles(b, dir, saved)
					b.StartTimer()
					l, err := Open(dir, cfg)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if got := l.EndOffset(); got == 0 {
						b.Fatalf("log end offset %d after recovery", got)
					}
					crash(l)
					b.StartTimer()
				}
				b.ReportMetric(float64(segs), "segments")
			})
			restoreSmallFiles(b, dir, saved)
			l, err := Open(dir, cfg)
			if err == nil {
				err = l.Close()
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Run("open-clean", func(b *testing.B) {
				for b.Loop() {
					l, err := Open(dir, cfg)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(segs), "segments")
			})
			l, err = Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			retainedHotPath(b, l, c.total)
		})
	}
}

// saveSmallFiles reads every file of dir but the .log files.
func saveSmallFiles(b *testing.B, dir string) map[string][]byte {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	saved := map[string][]byte{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), logSuffix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		saved[e.Name()] = data
	}
	return saved
}

// restoreSmallFiles makes dir's files other than .log exactly saved.
func restoreSmallFiles(b *testing.B, dir string, saved map[string][]byte) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if _, ok := saved[e.Name()]; !ok && !strings.HasSuffix(e.Name(), logSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				b.Fatal(err)
			}
		}
	}
	for name, data := range saved {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// retainedHotPath runs the per-request and per-tick sub-benchmarks on l,
// which holds total bytes.
func retainedHotPath(b *testing.B, l *Log, total int64) {
	batch := makeBatch(plain(64, 1000, time.Now().UnixMilli()))
	end := l.EndOffset()
	b.Run("read-tail", func(b *testing.B) {
		for b.Loop() {
			s, err := l.Read(end-1024, 1<<20, end)
			if err != nil || s.Len() == 0 {
				b.Fatal(err, s.Len())
			}
			s.Close()
		}
	})
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(len(batch)))
		for b.Loop() {
			if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 0}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("maintain", func(b *testing.B) {
		for b.Loop() {
			if err := l.Maintain(time.Now(), math.MaxInt64); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("size", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = l.Size()
		}
		if n < total {
			b.Fatal(fmt.Sprint("size ", n))
		}
	})
}
