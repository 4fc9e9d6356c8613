package testport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
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

// TestReserveAcrossProcesses: a second test process holding reservations
// never gets a port this one holds, as go test's parallel packages would.
func TestReserveAcrossProcesses(t *testing.T) {
	if os.Getenv("TESTPORT_CHILD") == "1" {
		for range 100 {
			addr, err := Reserve()
			if err != nil {
				fmt.Println("error", err)
				return
			}
			fmt.Println(addr)
		}
		io.Copy(io.Discard, os.Stdin) // hold the locks until the parent is done
		return
	}
	mine := map[string]bool{}
	for range 100 {
		addr, err := Reserve()
		if err != nil {
			t.Fatal(err)
		}
		mine[addr] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReserveAcrossProcesses$")
	cmd.Env = append(os.Environ(), "TESTPORT_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	sc := bufio.NewScanner(stdout)
	for range 100 {
		if !sc.Scan() {
			t.Fatalf("child: %v", sc.Err())
		}
		addr := sc.Text()
		if strings.HasPrefix(addr, "error") {
			t.Fatalf("child: %s", addr)
		}
		if mine[addr] {
			t.Fatalf("child process got %s, which this process holds", addr)
		}
	}
}

// TestReserveOnSharesReservations: ReserveOn keeps its host and draws
// from the same reservations as Reserve, so the two never hand out one
// port twice.
func TestReserveOnSharesReservations(t *testing.T) {
	seen := map[string]bool{}
	for i := range 100 {
		reserve := Reserve
		if i%2 == 1 {
			reserve = func() (string, error) { return ReserveOn("127.0.0.1") }
		}
		addr, err := reserve()
		if err != nil {
			t.Fatal(err)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("reserved %q: host %q, %v", addr, host, err)
		}
		if seen[port] {
			t.Fatalf("port %s handed out twice", port)
		}
		seen[port] = true
	}
}
