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
// consuming anything (recv with MSG_PEEK|MSG_DONTWAIT). It is only called
// by the connection's reader while it is not reading. A peer that closed
// after sending bytes that are still unread is not detected (the reader
// sees its close when it reads them).
func peerGone(nc net.Conn) bool {
	rc := rawConn(nc)
	if rc == nil {
		return false
	}
	gone := false
	var buf [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || errors.Is(err, unix.ECONNRESET)
		return true // never wait
	})
	return gone
}

// unreadBytes reports whether bytes the peer sent are waiting in the
// socket's receive queue (for TLS, in the underlying TCP connection's),
// checked as peerGone checks, without blocking or consuming anything. rc
// is rawConn's answer for the connection; nil reports false.
func unreadBytes(rc syscall.RawConn) bool {
	if rc == nil {
		return false
	}
	waiting := false
	var buf [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		waiting = n > 0 && err == nil
		return true // never wait
	})
	return waiting
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
