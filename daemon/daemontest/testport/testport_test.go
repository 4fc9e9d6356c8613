package testport

import (
	"net"
	"testing"
)

func TestReserveDistinctAndBindable(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr, err := Reserve()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("Reserve handed out %s twice", addr)
		}
		seen[addr] = true
	}
	for addr := range seen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("reserved %s is not bindable: %v", addr, err)
		}
		ln.Close()
		// A port-0 bind never lands in the reserved range.
		ln0, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln0.Addr().(*net.TCPAddr).Port
		ln0.Close()
		if p >= state.lo && p < state.hi {
			t.Fatalf("port-0 bind got %d, inside the reserved range [%d, %d)", p, state.lo, state.hi)
		}
		break
	}
}
