package main

// Kernel floors (--floors): what the kernel alone charges, in CPU seconds
// per GiB, for the work a broker cannot avoid, measured on this machine at
// this moment so that a broker's CPU-s/GiB can be read against them
// (issue 15, target 3; BENCHMARKS.md "Issue 15, session 4"). On a VM that
// returns freed memory to its host the cost of fresh page-cache pages
// moves by 3× with the host's state, so old figures do not carry over.
//
//   - write_fresh: 1 MiB write(2) calls filling a new file (fresh
//     page-cache pages, as a broker's new segments are), no fsync;
//   - sendfile: the file just written (cached) sent with sendfile(2), in
//     1 MiB calls, over one loopback TCP connection to another process
//     that reads and discards it (a consume's kernel work on the broker's
//     side: the reader's copy is charged to the reader);
//   - sendfile_fetch: the same, but in fetchBurst-byte answers, each
//     followed by a 1-byte reply from the peer before the next (one
//     consumer's fetch loop: 6 partitions of 1 MiB a request, then a
//     round trip); the per-answer ramp-up and wake-ups of a
//     request/response flow cost the sender about twice the streaming
//     sendfile;
//   - recv: read(2) in 1 MiB calls from a loopback TCP connection that
//     another process writes (the socket copy of a produce);
//   - crc32c: CRC-32C in user space over a 64 MiB buffer, larger than the
//     caches, as a broker's received requests are (the check every
//     produced batch needs; over one hot 1 MiB buffer it costs a third).
//
// CPU is getrusage(RUSAGE_SELF) user + system time of this process across
// the measured loop; the peer process is not counted, as a client is not
// in a broker's figure. A produce's floor is write_fresh + recv + crc32c,
// a consume's (one fetching client, as in tools/bench/profile.sh) is
// sendfile_fetch.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// floorResult is --floors' output, CPU seconds per GiB (2^30 bytes).
type floorResult struct {
	Bytes      int64   `json:"bytes"`
	WriteFresh float64 `json:"floor_write_fresh_cpu_s_per_gib"`
	Sendfile   float64 `json:"floor_sendfile_cpu_s_per_gib"`
	// SendfileFetch is sendfile in fetch-sized answers with a round trip
	// between them.
	SendfileFetch float64 `json:"floor_sendfile_fetch_cpu_s_per_gib"`
	Recv          float64 `json:"floor_recv_cpu_s_per_gib"`
	CRC32C        float64 `json:"floor_crc32c_cpu_s_per_gib"`
	// Produce and Consume are the floors of a broker's produce (write +
	// recv + crc32c) and consume (sendfile_fetch).
	Produce float64 `json:"floor_produce_cpu_s_per_gib"`
	Consume float64 `json:"floor_consume_cpu_s_per_gib"`
}

// peerEnv, when set in the environment, makes the process the other end
// of a loopback floor instead of measuring: "sink ADDR" connects to ADDR
// and reads until EOF, "source ADDR N" connects and writes N bytes. The
// measuring process re-executes itself with it (a test binary too, see
// TestMain), so the peer's CPU is not in the measured process's.
const peerEnv = "VLTAVA_CEILINGS_PEER"

// peerMain plays the peer role peerEnv asks for, if any; it reports
// whether it did (the caller then exits).
func peerMain() (bool, error) {
	spec := os.Getenv(peerEnv)
	if spec == "" {
		return false, nil
	}
	var role, addr string
	var total int64
	if n, _ := fmt.Sscan(spec, &role, &addr, &total); n < 2 {
		return true, fmt.Errorf("bad %s %q", peerEnv, spec)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return true, err
	}
	defer c.Close()
	switch role {
	case "sink":
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, make([]byte, chunk))
		return true, err
	case "fetcher":
		buf := make([]byte, fetchBurst)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return true, nil // the sender closed after its last answer
			}
			if _, err := c.Write([]byte{1}); err != nil {
				return true, err
			}
		}
	case "source":
		buf := filled(chunk)
		for n := int64(0); n < total; n += chunk {
			if _, err := c.Write(buf); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	return true, fmt.Errorf("bad %s role %q", peerEnv, role)
}

// cpuNow returns this process's user + system CPU time so far.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perGiB converts cpu spent on n bytes to CPU seconds per GiB.
func perGiB(cpu time.Duration, n int64) float64 {
	return cpu.Seconds() / (float64(n) / (1 << 30))
}

// measureFloors runs the four floors over total bytes with a file in dir.
func measureFloors(dir string, total int64) (floorResult, error) {
	total -= total % chunk
	r := floorResult{Bytes: total}
	path := filepath.Join(dir, fmt.Sprintf("ceilings-floor-%d.dat", os.Getpid()))
	defer os.Remove(path)
	var err error
	if r.WriteFresh, err = writeFresh(path, total); err != nil {
		return r, fmt.Errorf("write floor: %w", err)
	}
	if r.Sendfile, err = sendfileFloor(path, total, 0); err != nil {
		return r, fmt.Errorf("sendfile floor: %w", err)
	}
	if r.SendfileFetch, err = sendfileFloor(path, total, fetchBurst); err != nil {
		return r, fmt.Errorf("sendfile fetch floor: %w", err)
	}
	os.Remove(path) // its pages go back before the next floor
	if r.Recv, err = recvFloor(total); err != nil {
		return r, fmt.Errorf("recv floor: %w", err)
	}
	r.CRC32C = crcFloor(total)
	r.Produce = r.WriteFresh + r.Recv + r.CRC32C
	r.Consume = r.SendfileFetch
	return r, nil
}

// writeFresh fills a new file at path with total bytes in 1 MiB writes
// and returns the CPU-s/GiB the writes cost. The file is left in place.
func writeFresh(path string, total int64) (float64, error) {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	buf := filled(chunk)
	c0 := cpuNow()
	for n := int64(0); n < total; n += chunk {
		if _, err := fh.Write(buf); err != nil {
			fh.Close()
			return 0, err
		}
	}
	cpu := cpuNow() - c0
	return perGiB(cpu, total), fh.Close()
}

// startPeer listens on loopback and starts this program again as the peer
// role flag, connecting to the listener; it returns the accepted
// connection and the peer, which the caller must wait for.
func startPeer(role string, total int64) (*net.TCPConn, *exec.Cmd, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", peerEnv, role, ln.Addr(), total))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() { // owned by startPeer: ends when the listener accepts or closes
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, nil, a.err
		}
		return a.c.(*net.TCPConn), cmd, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		ln.Close()
		<-ch
		return nil, nil, errors.New("peer did not connect within 30s")
	}
}

// fetchBurst is the answer size of the sendfile_fetch floor: a default
// consumer's fetch of 6 partitions (tools/bench/profile.sh's topic) at
// its 1 MiB per partition.
const fetchBurst = 6 << 20

// sendfileFloor sends the file at path (total bytes, cached) to a reading
// peer process with sendfile and returns the CPU-s/GiB the sending cost.
// With burst > 0 it sends burst bytes at a time and waits for the peer's
// 1-byte reply after each (total is cut to whole bursts).
func sendfileFloor(path string, total, burst int64) (float64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	role := "sink"
	if burst > 0 {
		role, total = "fetcher", total-total%burst
	}
	c, cmd, err := startPeer(role, total)
	if err != nil {
		return 0, err
	}
	c0 := cpuNow()
	var sendErr error
	if burst == 0 {
		sendErr = sendFileTo(c, fh, 0, total)
	}
	reply := make([]byte, 1)
	for off := int64(0); burst > 0 && off < total && sendErr == nil; off += burst {
		if sendErr = sendFileTo(c, fh, off, burst); sendErr == nil {
			_, sendErr = io.ReadFull(c, reply)
		}
	}
	cpu := cpuNow() - c0
	c.Close()
	if err := cmd.Wait(); err != nil && sendErr == nil {
		sendErr = fmt.Errorf("sink: %w", err)
	}
	return perGiB(cpu, total), sendErr
}

// sendFileTo sends n bytes of f from offset start to c through the
// standard library's zero-copy path (TCPConn.ReadFrom of an *os.File
// behind a LimitedReader: sendfile(2) on Linux), the same kernel work as
// the broker's positioned sendfile in core/wire.
func sendFileTo(c *net.TCPConn, f *os.File, start, n int64) error {
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return err
	}
	sent, err := c.ReadFrom(io.LimitReader(f, n))
	if err == nil && sent != n {
		err = fmt.Errorf("sendfile: %d of %d bytes: %w", sent, n, io.ErrUnexpectedEOF)
	}
	return err
}

// recvFloor reads total bytes that a peer process writes and returns the
// CPU-s/GiB the reading cost.
func recvFloor(total int64) (float64, error) {
	c, cmd, err := startPeer("source", total)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, chunk)
	c0 := cpuNow()
	var n int64
	var readErr error
	for n < total && readErr == nil {
		var k int
		k, readErr = c.Read(buf)
		n += int64(k)
	}
	cpu := cpuNow() - c0
	c.Close()
	if errors.Is(readErr, io.EOF) && n == total {
		readErr = nil
	}
	if err := cmd.Wait(); err != nil && readErr == nil {
		readErr = fmt.Errorf("source: %w", err)
	}
	return perGiB(cpu, n), readErr
}

// crcBuf is the buffer the CRC floor walks, larger than the caches.
const crcBuf = 64 << 20

// crcFloor returns the CPU-s/GiB of CRC-32C over total bytes, taken
// 1 MiB at a time from a buffer of crcBuf bytes (total, if smaller).
func crcFloor(total int64) float64 {
	buf := filled(int(min(crcBuf, total)))
	tab := crc32.MakeTable(crc32.Castagnoli)
	var sum uint32
	c0 := cpuNow()
	for n := int64(0); n < total; n += chunk {
		off := n % int64(len(buf))
		sum = crc32.Update(sum, tab, buf[off:off+chunk])
	}
	cpu := cpuNow() - c0
	_ = sum
	return perGiB(cpu, total)
}
