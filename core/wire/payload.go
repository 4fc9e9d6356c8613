package wire

import (
	"math/bits"
	"sync"
)

// Request payload buffers of 64 KiB to growStep are recycled in
// power-of-two size classes. Only requests whose handlers keep no
// reference to the request's bytes after returning give their buffer back
// (Produce: the records are copied into the log); every other buffer is
// left to the garbage collector, so a handler that keeps request bytes
// (group metadata, for one) is always safe.
const (
	minPooledPayload = 64 << 10
	maxPooledPayload = growStep
)

var payloadPools [bits.UintSize]sync.Pool

// getPayload returns an empty buffer with room for at least n bytes.
func getPayload(n int) []byte {
	if n < minPooledPayload || n > maxPooledPayload {
		return make([]byte, 0, n)
	}
	class := bits.Len(uint(n - 1)) // 1<<class >= n
	if b, ok := payloadPools[class].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<class)
}

// getPooledPayload returns a recycled empty buffer with room for n bytes,
// or nil when the pool has none of that size class free.
func getPooledPayload(n int) []byte {
	if n < minPooledPayload || n > maxPooledPayload {
		return nil
	}
	if b, ok := payloadPools[bits.Len(uint(n-1))].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

// payloadCap is the capacity of the buffer getPayload(n) returns, which
// is what a frame of n bytes is charged in the request pool.
func payloadCap(n int) int {
	if n < minPooledPayload || n > maxPooledPayload {
		return n
	}
	return 1 << bits.Len(uint(n-1))
}

// putPayload recycles a buffer from getPayload. The caller must hold no
// reference into it.
func putPayload(b []byte) {
	c := cap(b)
	if c < minPooledPayload || c > maxPooledPayload || c&(c-1) != 0 {
		return
	}
	b = b[:0]
	payloadPools[bits.Len(uint(c-1))].Put(&b)
}
