//go:build linux

package wire

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerGone reports whether the peer of nc has closed or reset the
// connection and no unread bytes are left, checked without blocking or
// consuming anything (peek). It is only called by the connection's reader
// while it is not reading. A peer that closed after sending bytes that are
// still unread is not detected (the reader sees its close when it reads
// them).
func peerGone(nc net.Conn) bool {
	n, err := peek(rawConn(nc))
	return (n == 0 && err == nil) || errors.Is(err, unix.ECONNRESET)
}

// unreadBytes reports whether bytes the peer sent are waiting in the
// socket's receive queue (for TLS, in the underlying TCP connection's),
// checked without blocking or consuming anything (peek). rc is rawConn's
// answer for the connection; nil reports false.
func unreadBytes(rc syscall.RawConn) bool {
	n, err := peek(rc)
	return n > 0 && err == nil
}

// errNoSocket is peek's answer for a connection it cannot look into.
var errNoSocket = errors.New("wire: no socket to peek at")

// peek looks at the first unread byte of rc's socket with
// recv(MSG_PEEK|MSG_DONTWAIT), which never blocks or consumes: n is 1 when
// a byte waits, 0 with a nil error when the peer has closed, and the error
// is EAGAIN when nothing waits, errNoSocket when rc is nil or closed.
func peek(rc syscall.RawConn) (n int, err error) {
	if rc == nil {
		return 0, errNoSocket
	}
	var buf [1]byte
	if cerr := rc.Read(func(fd uintptr) bool {
		n, _, err = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true // never wait
	}); cerr != nil {
		return 0, errNoSocket
	}
	return n, err
}

// rawConn is nc's socket (under TLS, the TCP connection's), or nil.
func rawConn(nc net.Conn) syscall.RawConn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
