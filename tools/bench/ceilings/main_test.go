package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be the peer process of a floor
// (floors.go re-executes the running program).
func TestMain(m *testing.M) {
	if peer, err := peerMain(); peer {
		if err != nil {
			fmt.Fprintln(os.Stderr, "ceilings: peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestCeilingsMoveAllBytes(t *testing.T) {
	dir := t.TempDir()
	pc, err := pageCache(dir, 4<<20)
	if err != nil || pc <= 0 {
		t.Fatalf("pageCache: %v MiB/s, %v", pc, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("pageCache left %d files behind", len(left))
	}
	fs, err := fsyncAppend(dir, 1<<20, 256<<10)
	if err != nil || fs <= 0 {
		t.Fatalf("fsyncAppend: %v MiB/s, %v", fs, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("fsyncAppend left %d files behind", len(left))
	}
	fm, err := fsyncAppendFiles(dir, 3, 3<<20, 256<<10)
	if err != nil || fm <= 0 {
		t.Fatalf("fsyncAppendFiles: %v MiB/s, %v", fm, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("fsyncAppendFiles left %d files behind", len(left))
	}
	lo, err := loopback(4 << 20)
	if err != nil || lo <= 0 {
		t.Fatalf("loopback: %v MiB/s, %v", lo, err)
	}
}

func TestFloorsMeasureEveryFloor(t *testing.T) {
	dir := t.TempDir()
	r, err := measureFloors(dir, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 8<<20 {
		t.Errorf("bytes %d, want %d", r.Bytes, 8<<20)
	}
	if r.WriteFresh < 0 || r.Sendfile < 0 || r.SendfileFetch < 0 || r.Recv < 0 || r.CRC32C < 0 {
		t.Errorf("negative floor: %+v", r)
	}
	if r.Produce != r.WriteFresh+r.Recv+r.CRC32C || r.Consume != r.SendfileFetch {
		t.Errorf("produce/consume floors not the sums of their parts: %+v", r)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("floors left %d files behind", len(left))
	}
}
