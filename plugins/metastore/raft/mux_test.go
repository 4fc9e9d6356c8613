package raft

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// The mux's close returns only once every accepted connection's handler
// has let go of it, so the Store can close its log store after it: raft
// answers heartbeats on its transport's connection goroutines, which
// Raft.Shutdown does not wait for, and one that writes the term after the
// store closed panics ("failed to save current term: database not open",
// seen under -race). The handler here, like raft's, finishes the command
// in progress after its connection is closed.
func TestMuxCloseWaitsForConnectionHandlers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, ln.Addr(), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Write([]byte{tagRaft}); err != nil {
		t.Fatal(err)
	}
	conn, err := m.raftL.Accept()
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		var b [1]byte
		conn.Read(b[:]) // fails once the mux closes the connection
		time.Sleep(300 * time.Millisecond)
		released <- time.Now()
		conn.Close()
	}()
	m.close()
	returned := time.Now()
	select {
	case at := <-released:
		if returned.Before(at) {
			t.Fatal("close returned before the handler released its connection")
		}
	default:
		t.Fatal("close returned while the handler still held its connection")
	}
}
