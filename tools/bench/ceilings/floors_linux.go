//go:build linux

package main

import (
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// sendFileTo sends n bytes of f from offset start to c with sendfile(2),
// at most one chunk per call, waiting on the netpoller when the socket is
// full, as the broker's fetch path does (core/wire).
func sendFileTo(c *net.TCPConn, f *os.File, start, n int64) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	off, end := start, start+n
	var opErr error
	ctlErr := fc.Control(func(ffd uintptr) {
		werr := rc.Write(func(sfd uintptr) bool {
			for off < end {
				n, err := unix.Sendfile(int(sfd), int(ffd), &off, int(min(end-off, chunk)))
				switch {
				case err == unix.EAGAIN:
					return false
				case err == unix.EINTR:
				case err != nil:
					opErr = err
					return true
				case n == 0:
					opErr = io.ErrUnexpectedEOF
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
	return opErr
}
