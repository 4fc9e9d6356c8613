package main

import (
	"os"
	"testing"
)

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
