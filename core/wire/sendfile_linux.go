//go:build linux

package wire

import (
	"fmt"
	"io"
	"net"

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
