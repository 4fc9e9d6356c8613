package txn

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kerr"
)

func ids(next ...int64) func() (int64, error) {
	return func() (int64, error) {
		id := next[0]
		next = next[1:]
		return id, nil
	}
}

func TestLifecycle(t *testing.T) {
	t0, _, code, err := Init(nil, "a", 1000, 5000, -1, -1, 1, ids(7))
	if err != nil || code != 0 || t0.ProducerID != 7 || t0.Epoch != 0 || t0.Status != Empty {
		t.Fatalf("first init: %+v %d %v", t0, code, err)
	}
	if _, _, code, _ := Init(nil, "a", 6000, 5000, -1, -1, 1, ids(8)); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above max: %d", code)
	}
	t1, code := Add(t0, 7, 0, []TP{{"b", 1}, {"a", 0}, {"b", 1}}, 10)
	if code != 0 || t1.Status != Ongoing || t1.StartMs != 10 || !cmp.Equal(t1.Partitions, []TP{{"a", 0}, {"b", 1}}) {
		t.Fatalf("add: %+v %d", t1, code)
	}
	if again, code := Add(t1, 7, 0, []TP{{"a", 0}}, 11); again != nil || code != 0 {
		t.Fatalf("re-adding a partition changed the state: %+v %d", again, code)
	}
	if !t1.Has(7, 0, TP{"b", 1}) || t1.Has(7, 0, TP{"b", 0}) || t1.Has(7, 1, TP{"a", 0}) {
		t.Fatal("Has")
	}
	if _, code := Add(t1, 7, -1, nil, 12); code != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch: %d, want PRODUCER_FENCED", code)
	}
	if _, code := Add(t1, 8, 0, nil, 12); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("other producer: %d", code)
	}
	t2, code, _ := End(t1, 7, 0, true, false, 20, nil)
	if code != 0 || t2.Status != PrepareCommit {
		t.Fatalf("end: %+v %d", t2, code)
	}
	if _, code := Add(t2, 7, 0, []TP{{"c", 0}}, 21); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("add while preparing: %d", code)
	}
	t3 := Complete(t2, 30)
	if t3.Status != CompleteCommit || len(t3.Partitions) != 0 {
		t.Fatalf("complete: %+v", t3)
	}
	if n, code, _ := End(t3, 7, 0, true, false, 31, nil); n != nil || code != 0 {
		t.Fatalf("retried commit: %+v %d", n, code)
	}
	if _, code, _ := End(t3, 7, 0, false, false, 31, nil); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %d", code)
	}
	// A new instance while a transaction is open: abort under epoch 1,
	// then epoch 2.
	t4, _ := Add(t3, 7, 0, []TP{{"a", 0}}, 40)
	t5, again, code, _ := Init(t4, "a", 1000, 5000, -1, -1, 41, ids())
	if !again || code != 0 || t5.Status != PrepareAbort || t5.Epoch != 1 || !cmp.Equal(t5.Partitions, []TP{{"a", 0}}) {
		t.Fatalf("init over an open transaction: %+v again %v code %d", t5, again, code)
	}
	t6, again, code, _ := Init(Complete(t5, 42), "a", 1000, 5000, -1, -1, 43, ids())
	if again || code != 0 || t6.Epoch != 2 || t6.Status != Empty || t6.ProducerID != 7 {
		t.Fatalf("init after the abort: %+v %v %d", t6, again, code)
	}
	if _, code, _ := End(t6, 7, 1, true, false, 44, nil); code != kerr.ProducerFenced.Code {
		t.Fatalf("fenced instance's EndTxn: %d", code)
	}
}

func TestTimeoutAbortBumpsEpoch(t *testing.T) {
	cur := &Txn{ID: "a", ProducerID: 1, Epoch: 3, TimeoutMs: 100, Status: Ongoing, StartMs: 0, Partitions: []TP{{"x", 0}}}
	if cur.TimedOut(100) || !cur.TimedOut(101) {
		t.Fatal("TimedOut")
	}
	next := Abort(cur, 101)
	if next.Status != PrepareAbort || next.Epoch != 4 {
		t.Fatalf("abort: %+v", next)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	in := &Txn{ID: "tx", ProducerID: 9, Epoch: 2, TimeoutMs: 60000, Status: Ongoing,
		Partitions: []TP{{"a", 0}, {"a", 3}, {"b", 1}}, StartMs: 5, UpdateMs: 6}
	id, out, err := Decode(EncodeKey("tx"), EncodeValue(in))
	if err != nil || id != "tx" {
		t.Fatal(id, err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Fatalf("(-in +out):\n%s", diff)
	}
	if _, tomb, err := Decode(EncodeKey("tx"), nil); err != nil || tomb != nil {
		t.Fatal("tombstone", err)
	}
	if _, _, err := Decode([]byte{0, 9}, nil); err == nil {
		t.Fatal("bad key accepted")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(EncodeKey("tx"), EncodeValue(&Txn{ID: "tx", Partitions: []TP{{"a", 1}}}))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		Decode(key, value) // must not panic
	})
}

// TestEndBumpsEpoch: KIP-890 part 2. EndTxn v5 bumps the epoch at every
// end; a retry (the epoch before the bump) succeeds, a delayed EndTxn of
// the previous transaction arriving once the next one began is fenced,
// an abort with nothing open bumps too, and an overflowing bump hands
// out a new producer ID at epoch 0 while the markers keep the old one.
func TestEndBumpsEpoch(t *testing.T) {
	t0 := &Txn{ID: "a", ProducerID: 7, Epoch: 4, TimeoutMs: 1000, Status: Empty}
	t1, _ := Add(t0, 7, 4, []TP{{"x", 0}}, 10)
	t2, code, err := End(t1, 7, 4, true, true, 20, nil)
	if err != nil || code != 0 || t2.Status != PrepareCommit || t2.Epoch != 5 || !t2.TV2 {
		t.Fatalf("end v5: %+v %d %v", t2, code, err)
	}
	if pid, e := t2.Client(); pid != 7 || e != 5 {
		t.Fatalf("client continues with %d/%d, want 7/5", pid, e)
	}
	if n, code, _ := End(t2, 7, 4, true, true, 21, nil); n != nil || code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("retry while the markers are written: %+v %d", n, code)
	}
	t3 := Complete(t2, 30)
	if n, code, _ := End(t3, 7, 4, true, true, 31, nil); n != nil || code != 0 {
		t.Fatalf("retried commit: %+v %d", n, code)
	}
	if _, code, _ := End(t3, 7, 4, false, true, 31, nil); code != kerr.ProducerFenced.Code {
		t.Fatalf("abort with the old epoch after the commit: %d", code)
	}
	// The next transaction, at epoch 5; the delayed EndTxn of the first
	// (epoch 4) must not end it.
	t4, code := Add(t3, 7, 5, []TP{{"x", 0}}, 40)
	if code != 0 || t4.Status != Ongoing {
		t.Fatalf("next transaction: %+v %d", t4, code)
	}
	if n, code, _ := End(t4, 7, 4, true, true, 41, nil); n != nil || code != kerr.ProducerFenced.Code {
		t.Fatalf("delayed EndTxn of the previous transaction: %+v %d, want PRODUCER_FENCED", n, code)
	}
	// An abort with no transaction open: a marker-less PrepareAbort one
	// epoch up.
	t5, code, _ := End(Complete(Abort(t4, 50), 51), 7, 6, false, true, 52, nil)
	if code != 0 || t5.Status != PrepareAbort || t5.Epoch != 7 || len(t5.Partitions) != 0 {
		t.Fatalf("empty abort: %+v %d", t5, code)
	}
	// Overflow.
	hi := &Txn{ID: "a", ProducerID: 7, Epoch: math.MaxInt16 - 1, TimeoutMs: 1000, Status: Ongoing, Partitions: []TP{{"x", 0}}}
	p, code, err := End(hi, 7, math.MaxInt16-1, true, true, 60, ids(99))
	if err != nil || code != 0 || p.ProducerID != 7 || p.Epoch != math.MaxInt16-1 || !p.HasNext || p.NextProducerID != 99 {
		t.Fatalf("overflowing end: %+v %d %v", p, code, err)
	}
	if pid, e := p.Client(); pid != 99 || e != 0 {
		t.Fatalf("client continues with %d/%d, want 99/0", pid, e)
	}
	c := Complete(p, 61)
	if c.ProducerID != 99 || c.Epoch != 0 || c.HasNext || !c.HasPrev || c.PrevProducerID != 7 {
		t.Fatalf("completed overflow: %+v", c)
	}
	if n, code, _ := End(c, 7, math.MaxInt16-1, true, true, 62, nil); n != nil || code != 0 {
		t.Fatalf("retry of the overflowing commit: %+v %d", n, code)
	}
	_, back, err := Decode(EncodeKey("a"), EncodeValue(p))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, back); diff != "" {
		t.Fatalf("v1 record round trip (-in +out):\n%s", diff)
	}
	// v0 callers keep v0's rules: no bump, same-epoch retry.
	v0, _, _ := End(t1, 7, 4, true, false, 70, nil)
	if v0.Epoch != 4 || v0.TV2 {
		t.Fatalf("end v4 bumped: %+v", v0)
	}
}
