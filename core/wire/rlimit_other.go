//go:build !unix

package wire

// openFileLimit is unknown off Unix; DefaultMaxConnections then uses 1024.
func openFileLimit() (uint64, bool) { return 0, false }
