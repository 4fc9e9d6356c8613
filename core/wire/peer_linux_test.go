//go:build linux

package wire

import (
	"net"
	"testing"
	"time"
)

// The peeker tells an empty socket from one with bytes waiting and from
// one whose peer closed, consumes nothing, and allocates nothing per look
// (it runs before every produce and fetch the reader may answer itself).
func TestPeeker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	p := newPeeker(server)

	if p.unread() || p.gone() {
		t.Fatalf("empty socket: unread %v, gone %v", p.unread(), p.gone())
	}
	if n := testing.AllocsPerRun(100, func() { p.unread() }); n != 0 {
		t.Errorf("%v allocations per look", n)
	}
	client.Write([]byte{7})
	waitFor(t, "the byte to arrive", p.unread)
	if n := testing.AllocsPerRun(100, func() { p.unread() }); n != 0 {
		t.Errorf("%v allocations per look with a byte waiting", n)
	}
	var b [1]byte
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := server.Read(b[:]); n != 1 || b[0] != 7 {
		t.Fatalf("read after peeking: %d bytes (%v), %v", n, b, err)
	}
	if p.unread() {
		t.Fatal("unread after the byte was read")
	}
	client.Close()
	waitFor(t, "the peer's close", p.gone)
	if p.unread() {
		t.Fatal("unread after the peer closed")
	}
	if (&peeker{}).unread() || (&peeker{}).gone() {
		t.Fatal("a peeker without a socket answered")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
	}
}
