package log

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// benchBatch is a 16 KiB batch of 1 KiB records.
func benchBatch() []byte { return makeBatch(plain(15, 1024, 1)) }

func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.Logger = testConfig(nil).Logger
	return cfg
}

// BenchmarkAppend appends 16 KiB batches of 1 KiB records to the page
// cache (flush.messages off): validation, CRC, offset rewrite, write, index.
func BenchmarkAppend(b *testing.B) {
	l, err := Open(b.TempDir(), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendFsync is BenchmarkAppend with flush.messages=1 (fsync
// before every ack).
func BenchmarkAppendFsync(b *testing.B) {
	defer func(f func(*os.File) error) { fsync = f }(fsync)
	fsync = realFsync
	cfg := benchConfig()
	cfg.FlushMessages = 1
	l, err := Open(b.TempDir(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawWrite is the machine's ceiling: os.File.Write of the same
// 16 KiB buffers to the page cache.
func BenchmarkRawWrite(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	batch := benchBatch()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if _, err := f.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads 1 MiB fetches at varying offsets of a 32 MiB log
// and copies them out (the non-sendfile path).
func BenchmarkRead(b *testing.B) {
	l, err := Open(b.TempDir(), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch()
	for range 2048 {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	buf := make([]byte, 0, 2<<20)
	var off int64
	var n int64
	for b.Loop() {
		s, err := l.Read(off, 1<<20, end)
		if err != nil {
			b.Fatal(err)
		}
		buf, err = s.Bytes(buf[:0])
		s.Close()
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(buf))
		off = (off + 7919) % end
	}
	b.SetBytes(n / int64(b.N))
}

// BenchmarkReadLocate measures locating a fetch (index search and header
// scan) without copying: what the sendfile path costs before the kernel.
func BenchmarkReadLocate(b *testing.B) {
	l, err := Open(b.TempDir(), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := makeBatch(plain(1, 100, 1)) // small batches: many headers per fetch
	for range 50000 {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: -1}); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	var off int64
	for b.Loop() {
		s, err := l.Read(off, 1<<20, end)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		off = (off + 7919) % end
	}
}

// BenchmarkDurableRequests models a broker's produce requests over six
// flush.messages=1 partitions: ten clients, each sending requests of one
// 256 KiB batch per partition, one request at a time. "inTurn" appends and
// waits for each partition before the next (one fsync wait per partition
// per request, the handler before the Syncer); "syncer" writes all six,
// then waits for them together while a Syncer runs their fsyncs at once.
// It reports MiB/s of acknowledged data and appends per fsync.
func BenchmarkDurableRequests(b *testing.B) {
	defer func(f func(*os.File) error) { fsync = f }(fsync)
	fsync = func(f *os.File) error { fsyncs.Add(1); return realFsync(f) }
	batch := makeBatch(plain(255, 1000, 1)) // ≈ 256 KiB of 1 KiB records
	for _, mode := range []string{"inTurn", "syncer"} {
		b.Run(mode, func(b *testing.B) {
			cfg := benchConfig()
			cfg.FlushMessages = 1
			if mode == "syncer" {
				cfg.Syncer = NewSyncer()
				defer cfg.Syncer.Close()
			}
			logs := make([]*Log, 6)
			for i := range logs {
				l, err := Open(b.TempDir(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				logs[i] = l
			}
			const clients = 10
			var next atomic.Int64
			before := fsyncs.Load()
			b.SetBytes(int64(len(batch) * len(logs)))
			b.ResetTimer()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					mine := slices.Clone(batch)
					res := make([]AppendResult, len(logs))
					for next.Add(1) <= int64(b.N) {
						for j, l := range logs {
							r, err := l.Append(mine, AppendOptions{LeaderEpoch: -1, DeferDurable: mode == "syncer"})
							if err != nil {
								b.Error(err)
								return
							}
							res[j] = r
						}
						for j, l := range logs {
							if res[j].DurableAt > 0 {
								if err := l.AwaitDurable(res[j].DurableAt); err != nil {
									b.Error(err)
									return
								}
							}
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if n := fsyncs.Load() - before; n > 0 {
				b.ReportMetric(float64(b.N*len(logs))/float64(n), "appends/fsync")
			}
		})
	}
}
