//go:build !linux

package wire

import (
	"net"
	"syscall"
)

// peerGone is not implemented off Linux: a waiting reader notices a closed
// peer when it reads again.
func peerGone(net.Conn) bool { return false }

// unreadBytes is not implemented off Linux: it reports that bytes may be
// waiting, so the reader hands every request to the processor and keeps
// reading ahead.
func unreadBytes(syscall.RawConn) bool { return true }

// rawConn is not needed off Linux.
func rawConn(net.Conn) syscall.RawConn { return nil }
