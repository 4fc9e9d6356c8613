package raft

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	iradix "github.com/hashicorp/go-immutable-radix"

	"github.com/vltava/vltava/plugins/sdk"
)

func sampleCommands() []*command {
	return []*command{
		{typ: cmdWrite,
			conds: []sdk.Condition{{Key: "guard", Version: 7}, {Key: "new", Version: 0}},
			ops: []wop{
				{kind: opPut, key: "topics/a", value: []byte("cfg"), session: 0},
				{kind: opPut, key: "brokers/1", value: []byte{}, session: 42},
				{kind: opDelete, key: "old"},
				{kind: opDeleteMustExist, key: "gone"},
			}},
		{typ: cmdWrite, ops: []wop{{kind: opPut, key: "k", value: []byte("v")}}},
		{typ: cmdGrant, ttl: 1500 * time.Millisecond},
		{typ: cmdRevoke, session: 99},
		{typ: cmdExpire, session: 1 << 40},
		{typ: cmdKeepAlive, session: 7},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		got, err := decodeCommand(c.encode())
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", c, err)
		}
		if diff := cmp.Diff(c, got, cmp.AllowUnexported(command{}, wop{})); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	}
}

// TestCommandLayout pins the documented byte layout of a small entry.
func TestCommandLayout(t *testing.T) {
	c := &command{typ: cmdWrite, conds: []sdk.Condition{{Key: "a", Version: 1}},
		ops: []wop{{kind: opPut, key: "b", value: []byte("x"), session: 0}}}
	want := []byte{entryFormat, cmdWrite,
		1, 1, 'a', 2, // one condition: key "a", zigzag varint 1
		1, opPut, 1, 'b', 1, 'x', 0} // one put: key "b", value "x", session 0
	if got := c.encode(); !bytes.Equal(got, want) {
		t.Fatalf("encode = %v, want %v", got, want)
	}
	if got := (&command{typ: cmdRevoke, session: 3}).encode(); !bytes.Equal(got, []byte{1, cmdRevoke, 6}) {
		t.Fatalf("revoke = %v", got)
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	good := sampleCommands()[0].encode()
	for name, b := range map[string][]byte{
		"empty":       {},
		"format":      {2, cmdGrant, 2},
		"type":        {1, 9},
		"truncated":   good[:len(good)-3],
		"trailing":    append(append([]byte{}, good...), 0),
		"grant ttl 0": {1, cmdGrant, 0},
		"op kind":     {1, cmdWrite, 0, 1, 7, 1, 'k'},
		"huge count":  {1, cmdWrite, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge string": {1, cmdWrite, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		if _, err := decodeCommand(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(c.encode())
	}
	f.Add([]byte{1, cmdWrite, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		again, err := decodeCommand(c.encode())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if diff := cmp.Diff(c, again, cmp.AllowUnexported(command{}, wop{})); diff != "" {
			t.Fatalf("decode is not stable (-first +second):\n%s", diff)
		}
	})
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

func sampleSnapshot(t testing.TB) []byte {
	txn := iradix.New().Txn()
	txn.Insert([]byte("a"), &kvEntry{value: []byte("1"), version: 3})
	txn.Insert([]byte("b/eph"), &kvEntry{value: []byte{}, version: 5, session: 4})
	snap := &fsmSnapshot{tree: txn.Commit(), rev: 5, index: 9, sessions: []sessionRecord{{id: 4, ttl: time.Second}}}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	f := newFSM(testLogger(), 10, 10)
	if err := f.Restore(io.NopCloser(bytes.NewReader(sampleSnapshot(t)))); err != nil {
		t.Fatal(err)
	}
	kvs, rev := f.list("")
	want := []sdk.KeyValue{{Key: "a", Value: []byte("1"), Version: 3}, {Key: "b/eph", Value: []byte{}, Version: 5, Session: 4}}
	if diff := cmp.Diff(want, kvs); diff != "" || rev != 5 || f.index != 9 {
		t.Fatalf("restored rev %d index %d, keys (-want +got):\n%s", rev, f.index, diff)
	}
	if ttl, ok := f.sessionTTL(4); !ok || ttl != time.Second {
		t.Fatalf("session 4 = %v %v", ttl, ok)
	}
	if _, ok := f.sessions[4].keys["b/eph"]; !ok {
		t.Fatal("session 4 does not own b/eph after restore")
	}
	// A watch from before the snapshot cannot be served.
	if _, err := f.watch("", 2, false); !errors.Is(err, sdk.ErrCompacted) {
		t.Fatalf("watch from before the snapshot: %v, want ErrCompacted", err)
	}
}

func FuzzReadSnapshot(f *testing.F) {
	f.Add(sampleSnapshot(f))
	f.Add([]byte("VRFS\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := readSnapshot(bytes.NewReader(b)); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
	})
}

func TestParseVoters(t *testing.T) {
	v, err := ParseVoters("1@127.0.0.1:19091, 2@host-b:19091,3@[::1]:19091")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{1: "127.0.0.1:19091", 2: "host-b:19091", 3: "[::1]:19091"}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := FormatVoters(v); got != "1@127.0.0.1:19091,2@host-b:19091,3@[::1]:19091" {
		t.Fatalf("FormatVoters = %q", got)
	}
	for _, bad := range []string{"", "1", "x@h:1", "1@nohost", "1@h:1,1@h:2", "-1@h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) succeeded", bad)
		}
	}
	if _, err := Open(Config{NodeID: 4, DataDir: t.TempDir(), Voters: want}); err == nil {
		t.Fatal("Open with a node outside the voters succeeded")
	}
}
