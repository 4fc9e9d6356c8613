//go:build linux

package wire

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peeker looks at the first unread byte of a connection's socket (under
// TLS, the TCP connection's) with recv(MSG_PEEK|MSG_DONTWAIT), which never
// blocks or consumes. A connection makes one, used by its reader only,
// while it is not reading; its callback and buffer are made once, so a
// look allocates nothing (it runs before every produce and fetch the
// reader may answer itself).
type peeker struct {
	rc  syscall.RawConn // nil: no socket to look into (a pipe)
	fn  func(fd uintptr) bool
	buf [1]byte
	n   int
	err error
}

func newPeeker(nc net.Conn) *peeker {
	p := &peeker{rc: rawConn(nc)}
	p.fn = p.recv
	return p
}

func (p *peeker) recv(fd uintptr) bool {
	// recvfrom without a source address: unix.Recvfrom's address buffer
	// escapes, an allocation per look.
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.buf[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	p.n, p.err = int(n), nil
	if errno != 0 {
		p.n, p.err = 0, errno
	}
	return true // never wait
}

// errNoSocket is peek's answer for a connection it cannot look into.
var errNoSocket = errors.New("wire: no socket to peek at")

// peek returns 1 when a byte waits, 0 with a nil error when the peer has
// closed, EAGAIN when nothing waits, and errNoSocket when there is no
// socket or it is closed.
func (p *peeker) peek() (int, error) {
	if p.rc == nil {
		return 0, errNoSocket
	}
	if err := p.rc.Read(p.fn); err != nil {
		return 0, errNoSocket
	}
	return p.n, p.err
}

// gone reports whether the peer has closed or reset the connection and no
// unread bytes are left. A peer that closed after sending bytes that are
// still unread is not detected (the reader sees its close when it reads
// them).
func (p *peeker) gone() bool {
	n, err := p.peek()
	return (n == 0 && err == nil) || errors.Is(err, unix.ECONNRESET)
}

// unread reports whether bytes the peer sent wait in the receive queue;
// false without a socket, where only the reader's buffer can tell.
func (p *peeker) unread() bool {
	n, err := p.peek()
	return n > 0 && err == nil
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
