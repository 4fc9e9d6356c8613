//go:build linux

package wire

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); c.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// segsOut returns the TCP segments c has sent (TCP_INFO).
func segsOut(t *testing.T, c *net.TCPConn) uint32 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) { info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return info.Segs_out
}

// writeFrame writes f as one response with a writer on the zero-copy path
// and returns the bytes the client read.
func writeFrame(t *testing.T, server, client *net.TCPConn, f *Frame) []byte {
	t.Helper()
	w := newWriter(server, true, time.Minute, &counters{})
	got := make(chan []byte, 1)
	go func() { // owned by writeFrame: ends once the whole response arrived
		b := make([]byte, 8+f.Len())
		n, _ := io.ReadFull(client, b)
		got <- b[:n]
	}()
	if err := w.write(7, false, &Response{Frame: f}); err != nil {
		client.Close()
		<-got
		t.Fatal(err)
	}
	return <-got
}

// A partition's header before each file range must travel in the range's
// first segment, not as a packet of its own: five runs (header, range,
// header, range, trailer) go out in three segments, where writev before
// each sendfile sent five.
func TestFileRangeHeadersShareItsSegment(t *testing.T) {
	file, content := segmentFile(t, 4096)
	server, client := tcpPair(t)
	hdr1, hdr2, trailer := bytes.Repeat([]byte{1}, 39), bytes.Repeat([]byte{2}, 39), []byte{3, 3, 3}
	var f Frame
	f.AppendBytes(hdr1)
	f.AppendFile(FileRange{File: file, Pos: 0, Len: 1000})
	f.AppendBytes(hdr2)
	f.AppendFile(FileRange{File: file, Pos: 2000, Len: 1000})
	f.AppendBytes(trailer)
	before := segsOut(t, server)
	got := writeFrame(t, server, client, &f)
	segs := segsOut(t, server) - before
	want := bytes.Join([][]byte{{0, 0, 0, 0}, {0, 0, 0, 7}, hdr1, content[:1000], hdr2, content[2000:3000], trailer}, nil)
	binary.BigEndian.PutUint32(want, uint32(len(want)-4))
	if !bytes.Equal(got, want) {
		t.Fatalf("client read %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	if segs > 3 {
		t.Errorf("response went out in %d segments, want at most 3 (headers in their ranges' segments)", segs)
	}
}

// A byte run larger than the socket buffer, before a file range, is
// written whole through EAGAIN waits and partial sendmsg calls.
func TestLargeRunBeforeFileRangeSmallSendBuffer(t *testing.T) {
	file, content := segmentFile(t, 1<<20)
	server, client := tcpPair(t)
	if err := server.SetWriteBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	run := bytes.Repeat([]byte("run-"), 256<<10) // 1 MiB
	var f Frame
	f.AppendBytes(run)
	f.AppendFile(FileRange{File: file, Pos: 0, Len: int64(len(content))})
	got := writeFrame(t, server, client, &f)
	if len(got) != 8+len(run)+len(content) {
		t.Fatalf("client read %d bytes, want %d", len(got), 8+len(run)+len(content))
	}
	if !bytes.Equal(got[8:8+len(run)], run) || !bytes.Equal(got[8+len(run):], content) {
		t.Fatal("client read other bytes than the frame's")
	}
}
