//go:build !linux

package wire

import (
	"errors"
	"net"
)

// canSendfile reports whether sendFile is implemented on this platform.
const canSendfile = false

// sendFile is not implemented off Linux; writers copy instead.
func sendFile(*net.TCPConn, FileRange) (calls, sent int64, err error) {
	return 0, 0, errors.New("wire: sendfile not supported on this platform")
}
