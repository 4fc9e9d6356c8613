//go:build !linux

package wire

import "net"

// peeker is not implemented off Linux.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return &peeker{} }

// gone is false: a waiting reader notices a closed peer when it reads
// again.
func (*peeker) gone() bool { return false }

// unread is true: bytes may be waiting, so the reader hands every request
// to the processor and keeps reading ahead.
func (*peeker) unread() bool { return true }
