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
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
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
