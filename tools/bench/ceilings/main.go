// Command ceilings measures two of the machine's throughput ceilings that
// bound a single-node broker, for tools/bench/compare.sh:
//
//   - page-cache append: sequential 1 MiB write(2) calls to a new file in
//     --dir, no fsync (what a broker's log append costs at best);
//   - fsync'd append: sequential --fsync-chunk write(2) calls to a new
//     file in --dir, each followed by fsync, moving --fsync-bytes (what a
//     broker that acknowledges only durable writes costs at best: one
//     fsync per chunk, the best case of a group commit);
//   - fsync'd append over --fsync-files N files at once (N > 1): N
//     goroutines, each appending --fsync-chunk writes to its own file and
//     fsyncing after each, moving --fsync-bytes in all: what a broker
//     with N partitions that fsync before acknowledging can do at best
//     (concurrent fsyncs of one file system share journal commits, so
//     this may exceed the one-file figure);
//   - loopback TCP: one connection over 127.0.0.1 carrying 1 MiB writes
//     from a sender goroutine to a receiver goroutine (what one client
//     connection can carry at best).
//
// Each moves --bytes bytes. With --floors it measures instead the kernel
// floors in CPU seconds per GiB (floors.go): a write of fresh page-cache
// pages, sendfile over loopback to another process, a loopback receive
// from another process, and CRC-32C, and prints them as one JSON object
// (floorResult). Otherwise it prints one JSON object on stdout,
//
//	{"bytes":N,"pagecache_mib_per_sec":X,"loopback_mib_per_sec":Y,
//	 "fsync_bytes":M,"fsync_chunk":C,"fsync_mib_per_sec":Z,"fsyncs_per_sec":F,
//	 "fsync_files":N,"fsync_files_mib_per_sec":W,"fsync_files_fsyncs_per_sec":G}
//
// (the fsync fields only with --fsync-bytes > 0, the fsync_files ones
// only with --fsync-files > 1).
//
// with MiB = 2^20 bytes, the unit of `vltava perf`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// chunk is the size of each write.
const chunk = 1 << 20

func main() {
	if peer, err := peerMain(); peer {
		if err != nil {
			fmt.Fprintln(os.Stderr, "ceilings: peer:", err)
			os.Exit(1)
		}
		return
	}
	dir := flag.String("dir", os.TempDir(), "directory for the page-cache test file (removed afterwards)")
	bytes := flag.Int64("bytes", 256<<20, "bytes to move in each test")
	fsyncBytes := flag.Int64("fsync-bytes", 0, "bytes to move in the fsync'd append test (0: skip it)")
	fsyncChunk := flag.Int("fsync-chunk", chunk, "bytes per write+fsync in the fsync'd append test")
	floors := flag.Bool("floors", false, "measure the kernel floors in CPU-s/GiB instead (fresh page-cache write, loopback sendfile and receive, CRC-32C)")
	fsyncFiles := flag.Int("fsync-files", 0, "also run the fsync'd append test over this many files at once (>1)")
	flag.Parse()
	if *bytes < chunk {
		fmt.Fprintln(os.Stderr, "ceilings: --bytes must be at least 1 MiB")
		os.Exit(2)
	}
	if *floors {
		r, err := measureFloors(*dir, *bytes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ceilings:", err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	pc, err := pageCache(*dir, *bytes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceilings:", err)
		os.Exit(1)
	}
	lo, err := loopback(*bytes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceilings:", err)
		os.Exit(1)
	}
	out := struct {
		Bytes      int64   `json:"bytes"`
		PageCache  float64 `json:"pagecache_mib_per_sec"`
		Loopback   float64 `json:"loopback_mib_per_sec"`
		FsyncBytes int64   `json:"fsync_bytes,omitempty"`
		FsyncChunk int     `json:"fsync_chunk,omitempty"`
		Fsync      float64 `json:"fsync_mib_per_sec,omitempty"`
		FsyncsPS   float64 `json:"fsyncs_per_sec,omitempty"`
		Files      int     `json:"fsync_files,omitempty"`
		FilesRate  float64 `json:"fsync_files_mib_per_sec,omitempty"`
		FilesPS    float64 `json:"fsync_files_fsyncs_per_sec,omitempty"`
	}{Bytes: *bytes, PageCache: pc, Loopback: lo}
	if *fsyncBytes > 0 {
		if *fsyncChunk <= 0 || int64(*fsyncChunk) > *fsyncBytes {
			fmt.Fprintln(os.Stderr, "ceilings: --fsync-chunk must be positive and at most --fsync-bytes")
			os.Exit(2)
		}
		rate, err := fsyncAppend(*dir, *fsyncBytes, *fsyncChunk)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ceilings:", err)
			os.Exit(1)
		}
		out.FsyncBytes, out.FsyncChunk, out.Fsync = *fsyncBytes, *fsyncChunk, rate
		out.FsyncsPS = rate * (1 << 20) / float64(*fsyncChunk)
		if *fsyncFiles > 1 {
			rate, err := fsyncAppendFiles(*dir, *fsyncFiles, *fsyncBytes, *fsyncChunk)
			if err != nil {
				fmt.Fprintln(os.Stderr, "ceilings:", err)
				os.Exit(1)
			}
			out.Files, out.FilesRate = *fsyncFiles, rate
			out.FilesPS = rate * (1 << 20) / float64(*fsyncChunk)
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

// mibPerSec converts n bytes in d to MiB/s.
func mibPerSec(n int64, d time.Duration) float64 {
	return float64(n) / (1 << 20) / d.Seconds()
}

// pageCache appends total bytes in 1 MiB writes to a new file in dir and
// returns MiB/s; the file is removed afterwards.
func pageCache(dir string, total int64) (float64, error) {
	path := filepath.Join(dir, fmt.Sprintf("ceilings-%d.dat", os.Getpid()))
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	buf := filled(chunk)
	start := time.Now()
	for n := int64(0); n < total; n += chunk {
		if _, err := fh.Write(buf); err != nil {
			fh.Close()
			return 0, err
		}
	}
	if err := fh.Close(); err != nil {
		return 0, err
	}
	return mibPerSec(total, time.Since(start)), nil
}

// fsyncAppend appends total bytes in writes of size chunk to a new file
// in dir, fsyncing after each, and returns MiB/s; the file is removed
// afterwards.
func fsyncAppend(dir string, total int64, size int) (float64, error) {
	return fsyncAppendTo(dir, fmt.Sprintf("ceilings-fsync-%d.dat", os.Getpid()), total, size)
}

// fsyncAppendTo is fsyncAppend to the file name in dir.
func fsyncAppendTo(dir, name string, total int64, size int) (float64, error) {
	path := filepath.Join(dir, name)
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer fh.Close()
	buf := filled(size)
	start := time.Now()
	var n int64
	for ; n < total; n += int64(size) {
		if _, err := fh.Write(buf); err != nil {
			return 0, err
		}
		if err := fh.Sync(); err != nil {
			return 0, err
		}
	}
	return mibPerSec(n, time.Since(start)), nil
}

// fsyncAppendFiles runs fsyncAppend on n files at once, each moving
// total/n bytes, and returns the MiB/s of all together.
func fsyncAppendFiles(dir string, n int, total int64, size int) (float64, error) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			_, errs[i] = fsyncAppendTo(dir, fmt.Sprintf("ceilings-fsync-%d-%d.dat", os.Getpid(), i), total/int64(n), size)
		})
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	moved := (total/int64(n) + int64(size) - 1) / int64(size) * int64(size) * int64(n)
	return mibPerSec(moved, d), nil
}

// loopback sends total bytes over one 127.0.0.1 TCP connection and returns
// MiB/s measured from the first write until the receiver has read it all.
func loopback(total int64) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	type result struct {
		n   int64
		err error
	}
	got := make(chan result, 1)
	go func() { // owned by loopback: it ends at EOF and is waited for below
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		n, err := io.CopyBuffer(io.Discard, c, make([]byte, chunk))
		got <- result{n, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := filled(chunk)
	start := time.Now()
	for n := int64(0); n < total; n += chunk {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			<-got
			return 0, err
		}
	}
	c.Close()
	r := <-got
	d := time.Since(start)
	if r.err != nil {
		return 0, r.err
	}
	return mibPerSec(r.n, d), nil
}

// filled returns n bytes of a non-zero pattern.
func filled(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + 7)
	}
	return b
}
