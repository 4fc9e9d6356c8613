package checker

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hist builds histories by hand with explicit times.
type hist struct {
	ops []Op
	id  int64
	t   int64
}

func (h *hist) tick() int64 { h.t += 10; return h.t }

// send records an invoke and a completion for value on partition p of "t".
func (h *hist) send(proc, value string, p int32, typ string, offset int64) {
	h.id++
	h.ops = append(h.ops, Op{ID: h.id, Proc: proc, Type: Invoke, F: Send, Time: h.tick(), Topic: "t", Partition: p, Offset: -1, Value: value})
	h.ops = append(h.ops, Op{ID: h.id, Proc: proc, Type: typ, F: Send, Time: h.tick(), Topic: "t", Partition: p, Offset: offset, Value: value})
}

// txnSend records a send of value in transaction id.
func (h *hist) txnSend(id, value string, p int32, offset int64) {
	h.id++
	h.ops = append(h.ops, Op{ID: h.id, Proc: "p0", Type: Invoke, F: Send, Time: h.tick(), Topic: "t", Partition: p, Offset: -1, Value: value, Txn: id})
	h.ops = append(h.ops, Op{ID: h.id, Proc: "p0", Type: OK, F: Send, Time: h.tick(), Topic: "t", Partition: p, Offset: offset, Value: value, Txn: id})
}

// endTxn records ending transaction id with "commit" or "abort".
func (h *hist) endTxn(id, how string) {
	h.id++
	h.ops = append(h.ops, Op{ID: h.id, Proc: "p0", Type: Invoke, F: EndTxn, Time: h.tick(), Txn: id, Value: how, Offset: -1})
	h.ops = append(h.ops, Op{ID: h.id, Proc: "p0", Type: OK, F: EndTxn, Time: h.tick(), Txn: id, Value: how, Offset: -1})
}

// pollRC is poll under read_committed.
func (h *hist) pollRC(proc string, p int32, kv ...any) {
	h.poll(proc, p, kv...)
	h.ops[len(h.ops)-1].Isolation = ReadCommitted
}

// txnHistory: transaction x (values a, b at offsets 0, 1, marker at 2)
// committed, transaction y (c at 3, marker at 4) aborted.
func txnHistory() *hist {
	h := &hist{}
	h.txnSend("x", "a", 0, 0)
	h.txnSend("x", "b", 0, 1)
	h.endTxn("x", "commit")
	h.txnSend("y", "c", 0, 3)
	h.endTxn("y", "abort")
	return h
}

// poll records a poll returning reads (offset, value pairs) of partition p.
func (h *hist) poll(proc string, p int32, kv ...any) {
	h.id++
	var reads []Read
	for i := 0; i < len(kv); i += 2 {
		reads = append(reads, Read{Partition: p, Offset: int64(kv[i].(int)), Value: kv[i+1].(string)})
	}
	h.ops = append(h.ops, Op{ID: h.id, Proc: proc, Type: OK, F: Poll, Time: h.tick(), Topic: "t", Reads: reads})
}

// clean is a history with no anomalies: three acked sends on two
// partitions, all read back once in order.
func clean() *hist {
	h := &hist{}
	h.send("p0", "a", 0, OK, 0)
	h.send("p0", "b", 0, OK, 1)
	h.send("p0", "c", 1, OK, 0)
	h.send("p0", "d", 0, Fail, -1) // failed and never read: fine
	h.send("p0", "e", 0, Info, -1) // unknown and never read: fine
	h.poll("c0", 0, 0, "a", 1, "b")
	h.poll("c0", 1, 0, "c")
	return h
}

func TestCleanHistoryHasNoAnomalies(t *testing.T) {
	r := Check(clean().ops)
	if len(r.Anomalies) != 0 {
		t.Fatalf("clean history: %v", r.Anomalies)
	}
	if r.Sends != 5 || r.Acked != 3 || r.Failed != 1 || r.Unknown != 1 || r.Read != 3 {
		t.Fatalf("counts: %s", r.Summary())
	}
}

// TestEachDetectorDetects feeds histories with exactly one anomaly and
// asserts that exactly that anomaly is reported.
func TestEachDetectorDetects(t *testing.T) {
	cases := []struct {
		name  string
		build func() *hist
	}{
		{LostWrite, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, OK, 0)
			h.send("p0", "b", 0, OK, 1)
			h.poll("c0", 0, 1, "b") // offset 0 skipped: "a" is gone
			return h
		}},
		{Unseen, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, OK, 0)
			h.send("p0", "b", 0, OK, 1)
			h.poll("c0", 0, 0, "a") // the read stopped before "b"
			return h
		}},
		{Duplicate, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, OK, 1)
			h.poll("c0", 0, 0, "a", 1, "a") // a retry wrote "a" twice
			return h
		}},
		{InconsistentOffsets, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, OK, 0)
			h.send("p0", "b", 0, Info, -1)
			h.poll("c0", 0, 0, "a")
			h.poll("c1", 0, 0, "b") // another reader sees another value at 0
			return h
		}},
		{NonMonotonicPoll, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, OK, 0)
			h.send("p0", "b", 0, OK, 1)
			h.poll("c0", 0, 1, "b")
			h.poll("c0", 0, 0, "a") // went back without an assign
			return h
		}},
		{NonMonotonicSend, func() *hist {
			h := &hist{}
			// Two pipelined sends of one producer: invoked a then b,
			// both acknowledged after both were invoked (no real-time
			// order), but b got the lower offset.
			h.ops = append(h.ops,
				Op{ID: 1, Proc: "p0", Type: Invoke, F: Send, Time: 1, Topic: "t", Value: "a", Offset: -1},
				Op{ID: 2, Proc: "p0", Type: Invoke, F: Send, Time: 2, Topic: "t", Value: "b", Offset: -1},
				Op{ID: 2, Proc: "p0", Type: OK, F: Send, Time: 3, Topic: "t", Value: "b", Offset: 0},
				Op{ID: 1, Proc: "p0", Type: OK, F: Send, Time: 4, Topic: "t", Value: "a", Offset: 1},
			)
			h.t = 5
			h.poll("c0", 0, 0, "b", 1, "a")
			return h
		}},
		{Reordering, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, OK, 1) // acknowledged first...
			h.send("p1", "b", 0, OK, 0) // ...yet a later send by another producer got a lower offset
			h.poll("c0", 0, 0, "b", 1, "a")
			return h
		}},
		{AbortedRead, func() *hist {
			h := &hist{}
			h.send("p0", "a", 0, Fail, -1)
			h.poll("c0", 0, 0, "a")
			return h
		}},
		{AbortedRead + "/read_committed", func() *hist {
			h := txnHistory()
			h.pollRC("c0", 0, 0, "a", 1, "b", 3, "c") // c's transaction aborted
			return h
		}},
		{TornTransaction, func() *hist {
			h := txnHistory()
			h.poll("c0", 0, 0, "a", 1, "b") // a read_uncommitted reader sees both
			h.pollRC("c1", 0, 0, "a")       // a read_committed one sees a...
			h.send("p1", "d", 0, OK, 5)     // ...and reads on past b
			h.pollRC("c1", 0, 5, "d")
			return h
		}},
		{WriteCycle, func() *hist {
			// x and y both write partitions 0 and 1, x first in 0 and
			// y first in 1: G0.
			h := &hist{}
			h.txnSend("x", "a", 0, 0)
			h.txnSend("y", "b", 0, 1)
			h.txnSend("y", "c", 1, 0)
			h.txnSend("x", "d", 1, 1)
			h.endTxn("x", "commit")
			h.endTxn("y", "commit")
			h.pollRC("c0", 0, 0, "a", 1, "b")
			h.pollRC("c0", 1, 0, "c", 1, "d")
			return h
		}},
		{DirtyRead, func() *hist {
			h := &hist{}
			h.txnSend("x", "a", 0, 0)
			h.pollRC("c0", 0, 0, "a") // returned before the commit was sent
			h.endTxn("x", "commit")
			return h
		}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		name, _, _ := strings.Cut(c.name, "/")
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.build().ops)
			if got := r.Names(); !slices.Equal(got, []string{name}) {
				t.Fatalf("want exactly [%s], got %v: %v", name, got, r.Anomalies)
			}
		})
		covered[name] = true
	}
	for _, n := range AllAnomalies {
		if !covered[n] {
			t.Errorf("no test history for anomaly %s", n)
		}
	}
}

// TestCleanTransactions: committed values read under read_committed,
// aborted ones only under read_uncommitted, an unknown transaction's
// values never read: no anomaly, and the aborted send is counted apart.
func TestCleanTransactions(t *testing.T) {
	h := txnHistory()
	h.pollRC("c0", 0, 0, "a", 1, "b")
	h.poll("c1", 0, 0, "a", 1, "b", 3, "c")
	h.txnSend("z", "e", 0, 5) // never ended: provisional, not unseen
	r := Check(h.ops)
	if len(r.Anomalies) != 0 {
		t.Fatalf("clean transactions: %v", r.Anomalies)
	}
	if r.Acked != 3 || r.Aborted != 1 {
		t.Fatalf("counts: %s", r.Summary())
	}
}

// TestNoWriteCycleInOrder: transactions that write several partitions in
// different orders but one after the other, and an aborted one
// interleaved, make no write cycle.
func TestNoWriteCycleInOrder(t *testing.T) {
	h := &hist{}
	h.txnSend("x", "a", 1, 0)
	h.txnSend("x", "b", 0, 0)
	h.txnSend("z", "e", 0, 1) // aborted: not part of the order
	h.txnSend("y", "c", 0, 2)
	h.txnSend("y", "d", 1, 1)
	h.txnSend("x", "f", 0, 3) // ...but this one would close a cycle x→y→x
	h.endTxn("x", "commit")
	h.endTxn("y", "commit")
	h.endTxn("z", "abort")
	if r := Check(h.ops); r.Count(WriteCycle) != 1 {
		t.Fatalf("x, y, x in partition 0: %v", r.Anomalies)
	}
	h = &hist{}
	h.txnSend("x", "a", 1, 0)
	h.txnSend("x", "b", 0, 0)
	h.txnSend("z", "e", 0, 1)
	h.txnSend("y", "c", 0, 2)
	h.txnSend("y", "d", 1, 1)
	h.endTxn("x", "commit")
	h.endTxn("y", "commit")
	h.endTxn("z", "abort")
	if r := Check(h.ops); r.Count(WriteCycle) != 0 {
		t.Fatalf("x before y everywhere: %v", r.Anomalies)
	}
}

func TestAssignResetsPollOrder(t *testing.T) {
	h := &hist{}
	h.send("p0", "a", 0, OK, 0)
	h.poll("c0", 0, 0, "a")
	h.ops = append(h.ops, Op{ID: 99, Proc: "c0", Type: OK, F: Assign, Time: h.tick()})
	h.poll("c0", 0, 0, "a") // re-read after a seek: allowed, and not a duplicate
	h.poll("c1", 0, 0, "a") // another consumer re-reads it: redelivered
	r := Check(h.ops)
	if len(r.Anomalies) != 0 {
		t.Fatalf("re-read after assign: %v", r.Anomalies)
	}
	if r.Redelivered != 1 {
		t.Fatalf("redelivered = %d, want 1", r.Redelivered)
	}
}

// TestRecorderRoundTrip writes a history through two recorders sharing a
// clock and checks the merged file finds a lost write.
func TestRecorderRoundTrip(t *testing.T) {
	dir := t.TempDir()
	clock := NewClock()
	sends, polls := filepath.Join(dir, "sent.jsonl"), filepath.Join(dir, "seen.jsonl")
	p, err := Create(sends, "p0", clock)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"a", "b"} {
		op := p.Invoke(Op{F: Send, Topic: "t", Offset: -1, Value: v})
		op.Offset = int64(i)
		p.Complete(op, OK)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Create(polls, "c0", clock)
	if err != nil {
		t.Fatal(err)
	}
	op := c.Invoke(Op{F: Poll, Topic: "t"})
	op.Reads = []Read{{Partition: 0, Offset: 1, Value: "b"}}
	c.Complete(op, OK)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := ReadFiles(polls, sends)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 6 || ops[0].F != Send {
		t.Fatalf("merged history not ordered by time: %+v", ops)
	}
	r := Check(ops)
	if !slices.Equal(r.Names(), []string{LostWrite}) || r.Acked != 2 || r.Read != 1 {
		t.Fatalf("round trip: %s %v", r.Summary(), r.Anomalies)
	}
}
