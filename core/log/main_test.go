package log

import (
	"os"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// fsyncs counts fsync calls made by tests.
var fsyncs atomic.Int64

// realFsync is the production fsync, for benchmarks that measure it.
var realFsync = fsync

// fsyncReal is the production fsync too, for tests of its fault injection.
var fsyncReal = fsync

func TestMain(m *testing.M) {
	fsync = func(*os.File) error { fsyncs.Add(1); return nil }
	// Every goroutine the package starts (the Cleaner's) has an owner
	// that stops and waits for it.
	goleak.VerifyTestMain(m)
}

func TestFlushMessages(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1 << 20
	cfg.FlushMessages = 1
	l := openLog(t, t.TempDir(), cfg)
	for i := range 10 {
		before := fsyncs.Load()
		appendBatch(t, l, nil, plain(1, 10, int64(i)))
		if fsyncs.Load() == before {
			t.Fatalf("append %d returned without fsync under flush.messages=1", i)
		}
	}
	cfg.FlushMessages = 5
	l.SetConfig(cfg)
	synced := 0
	for i := range 10 {
		before := fsyncs.Load()
		appendBatch(t, l, nil, plain(1, 10, int64(i)))
		if fsyncs.Load() != before {
			synced++
		}
	}
	if synced != 2 {
		t.Fatalf("flush.messages=5 synced after %d of 10 appends, want 2", synced)
	}
	cfg.FlushMessages = 0
	l.SetConfig(cfg)
	before := fsyncs.Load()
	appendBatch(t, l, nil, plain(1, 10, 1))
	if fsyncs.Load() != before {
		t.Fatal("page-cache mode fsynced")
	}
}

func TestFlushMs(t *testing.T) {
	cfg := testConfig(nil)
	cfg.SegmentBytes = 1 << 20
	cfg.FlushMs = 1000
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	appendBatch(t, l, nil, plain(1, 10, 1))
	if err := l.Maintain(timeAfter(0), noHW); err != nil {
		t.Fatal(err)
	}
	if rp, _ := readOffsetCheckpoint(dir, recoveryPointFile); rp != 0 {
		t.Fatalf("recovery point %d before flush.ms passed", rp)
	}
	if err := l.Maintain(timeAfter(2), noHW); err != nil {
		t.Fatal(err)
	}
	if rp, err := readOffsetCheckpoint(dir, recoveryPointFile); rp != 1 || err != nil {
		t.Fatalf("recovery point %d (%v) after flush.ms, want 1", rp, err)
	}
}
