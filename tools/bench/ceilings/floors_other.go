//go:build !linux

package main

import (
	"io"
	"net"
	"os"
)

// sendFileTo sends n bytes of f from offset start to c (the standard
// library's zero-copy path where the platform has one).
func sendFileTo(c *net.TCPConn, f *os.File, start, n int64) error {
	_, err := io.Copy(c, io.NewSectionReader(f, start, n))
	return err
}
