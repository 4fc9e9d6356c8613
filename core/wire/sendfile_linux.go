//go:build linux

package wire

import (
	"fmt"
	"io"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// canSendfile reports whether sendFile is implemented on this platform.
const canSendfile = true

// maxSendfileChunk bounds one sendfile(2) call; Linux moves at most
// 0x7ffff000 bytes per call anyway.
const maxSendfileChunk = 1 << 30

// sendFile sends r to the socket of tc with positioned sendfile(2): the
// offset is passed explicitly, so the file's shared offset never moves and
// concurrent sends from one file are safe. The file's descriptor is used
// only inside its SyscallConn().Control (never os.File.Fd, which would put
// the file in blocking mode). The socket side runs inside
// SyscallConn().Write, which waits on the netpoller when the socket buffer
// is full (EAGAIN) and honours the write deadline. It loops until the whole
// range is sent; a range beyond the end of the file is an error. It returns
// the number of sendfile calls that moved bytes and the bytes sent.
func sendFile(tc *net.TCPConn, r FileRange) (calls, sent int64, err error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("wire: sendfile: %w", err)
	}
	fc, err := r.File.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("wire: sendfile: %w", err)
	}
	off, remain := r.Pos, r.Len
	var opErr error
	ctlErr := fc.Control(func(ffd uintptr) {
		werr := rc.Write(func(sfd uintptr) bool {
			for remain > 0 {
				n, err := unix.Sendfile(int(sfd), int(ffd), &off, int(min(remain, maxSendfileChunk)))
				if n > 0 {
					calls++
					sent += int64(n)
					remain -= int64(n)
				}
				switch {
				case err == unix.EAGAIN:
					return false // wait for writability, then call again
				case err == unix.EINTR:
				case err != nil:
					opErr = err
					return true
				case n == 0:
					opErr = io.ErrUnexpectedEOF // range beyond the end of the file
					return true
				}
			}
			return true
		})
		if opErr == nil {
			opErr = werr
		}
	})
	if opErr == nil {
		opErr = ctlErr
	}
	if opErr != nil {
		return calls, sent, fmt.Errorf("wire: sendfile %s [%d, +%d) at %d: %w", r.File.Name(), r.Pos, r.Len, off, opErr)
	}
	return calls, sent, nil
}

// moreWriter writes byte runs that a file range follows with
// sendmsg(MSG_MORE): the kernel keeps them in the socket's last,
// unsent segment, and the sendfile after them fills that segment and
// pushes it. Written as a plain writev, with TCP_NODELAY set, each run
// (a partition's header in a fetch response, some tens of bytes) left
// as a packet of its own: over loopback, a transmit and a receive for
// the sender and a wake-up of the reader each. Its iovec array is
// reused across calls.
type moreWriter struct {
	iov []unix.Iovec
}

// write writes bufs whole to tc, waiting on the netpoller while the
// socket is full, and returns the bytes written.
func (m *moreWriter) write(tc *net.TCPConn, bufs [][]byte) (int64, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("wire: write: %w", err)
	}
	var sent int64
	var opErr error
	werr := rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := m.sendmsg(fd, bufs)
			sent += int64(n)
			bufs = advance(bufs, n)
			switch {
			case err == unix.EAGAIN:
				return false // wait for writability, then call again
			case err == unix.EINTR:
			case err != nil:
				opErr = err
				return true
			}
		}
		return true
	})
	clear(m.iov) // drop the references to bufs
	if opErr == nil {
		opErr = werr
	}
	if opErr != nil {
		return sent, fmt.Errorf("wire: write: %w", opErr)
	}
	return sent, nil
}

// sendmsg makes one sendmsg(MSG_MORE) call with bufs (non-empty).
func (m *moreWriter) sendmsg(fd uintptr, bufs [][]byte) (int, error) {
	m.iov = m.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			m.iov = append(m.iov, v)
		}
	}
	if len(m.iov) == 0 {
		return 0, nil
	}
	msg := unix.Msghdr{Iov: &m.iov[0]}
	msg.SetIovlen(len(m.iov))
	n, _, errno := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&msg)), unix.MSG_MORE|unix.MSG_NOSIGNAL)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// advance drops the first n bytes of bufs, and any empty runs at its
// head.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
