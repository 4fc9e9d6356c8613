package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/record/recordtest"
)

// txnProducer is a franz-go transactional producer of b.
func txnProducer(t *testing.T, b *Broker, id, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return testClient(t, b, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30 * time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceTxn runs one transaction of values to partition 0 and ends it.
func produceTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// consumeValues reads topic from the start with the given isolation until
// want values arrived or the deadline passes, and returns what it read
// (more than want if more are there).
func consumeValues(t *testing.T, b *Broker, topic string, committed bool, want int, wait time.Duration) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := testClient(t, b, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func TestTxnCommitAbortReadCommitted(t *testing.T) {
	b := testBroker(t)
	admin := testClient(t, b)
	createTopic(t, admin, "tx", 1, nil)
	p := txnProducer(t, b, "tx-1", "tx")
	produceTxn(t, p, true, "c1", "c2", "c3")
	produceTxn(t, p, false, "a1", "a2")
	produceTxn(t, p, true, "c4")

	if got, want := consumeValues(t, b, "tx", true, 4, 10*time.Second), []string{"c1", "c2", "c3", "c4"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed read %q, want %q", got, want)
	}
	if got, want := consumeValues(t, b, "tx", false, 6, 10*time.Second), []string{"c1", "c2", "c3", "a1", "a2", "c4"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted read %q, want %q", got, want)
	}
	// 6 records and 3 markers: the end offset counts the markers.
	if hw := listOffset(t, admin, "tx", 0, -1).Offset; hw != 9 {
		t.Fatalf("high watermark %d, want 9 (6 records, 3 markers)", hw)
	}
}

// listOffsetIso is ListOffsets latest with an isolation level.
func listOffsetIso(t *testing.T, cl *kgo.Client, topic string, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 5
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ListOffsetsResponse](t, cl, req)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	return sp.Offset
}

// TestTxnLastStableOffset: an open transaction holds back the last stable
// offset, ListOffsets read_committed and read_committed consumers, until
// it commits.
func TestTxnLastStableOffset(t *testing.T) {
	b := testBroker(t)
	admin := testClient(t, b)
	createTopic(t, admin, "lso", 1, nil)
	plain := testClient(t, b, kgo.DefaultProduceTopic("lso"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(context.Background(), &kgo.Record{Value: []byte("p0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := txnProducer(t, b, "lso-1", "lso")
	ctx := context.Background()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("p1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if lso, hw := listOffsetIso(t, admin, "lso", true), listOffsetIso(t, admin, "lso", false); lso != 1 || hw != 3 {
		t.Fatalf("with a transaction open at 1: read_committed latest %d (want 1), read_uncommitted %d (want 3)", lso, hw)
	}
	if got := consumeValues(t, b, "lso", true, 2, 2*time.Second); !slices.Equal(got, []string{"p0"}) {
		t.Fatalf("read_committed with a transaction open read %q, want only p0", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if lso := listOffsetIso(t, admin, "lso", true); lso != 4 {
		t.Fatalf("after commit read_committed latest %d, want 4", lso)
	}
	if got, want := consumeValues(t, b, "lso", true, 3, 10*time.Second), []string{"p0", "open", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed after commit read %q, want %q", got, want)
	}
}

// TestTxnZombieFenced: a second producer with the same transactional ID
// fences the first; the first's open transaction is aborted and none of
// its writes, before or after fencing, become visible.
func TestTxnZombieFenced(t *testing.T) {
	b := testBroker(t)
	admin := testClient(t, b)
	createTopic(t, admin, "zombie", 1, nil)
	ctx := context.Background()
	old := txnProducer(t, b, "z", "zombie", kgo.RetryTimeout(3*time.Second))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := txnProducer(t, b, "z", "zombie")
	produceTxn(t, fresh, true, "fresh")
	// The old instance keeps going: its writes and its commit fail.
	err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-after")}).FirstErr()
	endErr := old.EndTransaction(ctx, kgo.TryCommit)
	if err == nil && endErr == nil {
		t.Fatal("the fenced producer wrote and committed")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(endErr, kerr.ProducerFenced) && !errors.Is(endErr, kerr.InvalidProducerEpoch) {
		t.Logf("fenced producer errors: produce %v, end %v", err, endErr)
	}
	if got := consumeValues(t, b, "zombie", true, 2, 3*time.Second); !slices.Equal(got, []string{"fresh"}) {
		t.Fatalf("read_committed read %q, want only the new instance's record", got)
	}
}

// TestTxnProduceOutsideTransaction is KIP-890 part 1: a transactional
// batch for a partition not added to the producer's transaction is
// refused, so it can not leave a transaction hanging.
func TestTxnProduceOutsideTransaction(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "hang", 2, nil)
	id := "hang-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	ir := request[*kmsg.InitProducerIDResponse](t, cl, init)
	if ir.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "hang", Partitions: []int32{0}}}
	if ar := addPartitionsV3(t, cl, add); ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partitions: %v", kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
	}
	produce := func(partition int32) int16 {
		batch := recordtest.Build(recordtest.Options{Transactional: true, Producer: &recordtest.Producer{ID: ir.ProducerID, Epoch: ir.ProducerEpoch}},
			recordtest.Rec{Value: []byte("v"), Timestamp: time.Now().UnixMilli()})
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "hang", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
		return request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(1); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce to a partition outside the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if code := produce(0); code != 0 {
		t.Fatalf("produce to a partition in the transaction: %v", kerr.ErrorForCode(code))
	}
}

// TestTxnTimeoutAborts: a transaction left open past its timeout is
// aborted by the coordinator and stops holding back the last stable
// offset.
func TestTxnTimeoutAborts(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) { c.TransactionAbortTimedOutTransactionCleanupIntervalMs = 100 })
	admin := testClient(t, b)
	createTopic(t, admin, "hung", 1, nil)
	p := txnProducer(t, b, "hung-1", "hung", kgo.TransactionTimeout(time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(context.Background(), &kgo.Record{Value: []byte("left open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for listOffsetIso(t, admin, "hung", true) != 2 { // record and abort marker
		if time.Now().After(deadline) {
			t.Fatalf("transaction not aborted after its timeout: read_committed latest %d", listOffsetIso(t, admin, "hung", true))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := consumeValues(t, b, "hung", true, 1, time.Second); len(got) != 0 {
		t.Fatalf("read_committed read %q from an aborted transaction", got)
	}
}

// TestTxnOffsetCommit: offsets committed in a transaction are invisible
// (RequireStable: UNSTABLE_OFFSET_COMMIT) until it commits, and dropped
// when it aborts.
func TestTxnOffsetCommit(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b, pinEndTxnV4) // one epoch for several transactions
	createTopic(t, cl, "in", 1, nil)
	id, g := "off-1", "g1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	ir := request[*kmsg.InitProducerIDResponse](t, cl, init)
	if ir.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	fetch := func(stable bool) (int64, int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = stable
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "in", Partitions: []int32{0}}}}}
		resp := request[*kmsg.OffsetFetchResponse](t, cl, req)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("offset fetch: %+v", resp)
		}
		sp := resp.Groups[0].Topics[0].Partitions[0]
		return sp.Offset, sp.ErrorCode
	}
	txnCommit := func(offset int64, commit bool) {
		t.Helper()
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, ir.ProducerID, ir.ProducerEpoch, g
		if r := request[*kmsg.AddOffsetsToTxnResponse](t, cl, add); r.ErrorCode != 0 {
			t.Fatalf("add offsets: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = id, g, ir.ProducerID, ir.ProducerEpoch, -1
		tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		if r := request[*kmsg.TxnOffsetCommitResponse](t, cl, tc); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("txn offset commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
		}
		if off, code := fetch(true); code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("require stable with a pending offset: %d %v, want UNSTABLE_OFFSET_COMMIT", off, kerr.ErrorForCode(code))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, ir.ProducerID, ir.ProducerEpoch, commit
		if r := request[*kmsg.EndTxnResponse](t, cl, end); r.ErrorCode != 0 {
			t.Fatalf("end txn: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	txnCommit(5, true)
	if off, code := fetch(true); off != 5 || code != 0 {
		t.Fatalf("after commit: offset %d %v, want 5", off, kerr.ErrorForCode(code))
	}
	txnCommit(9, false)
	if off, code := fetch(true); off != 5 || code != 0 {
		t.Fatalf("after abort: offset %d %v, want 5 still", off, kerr.ErrorForCode(code))
	}
}

// TestTxnStateSurvivesRestart: the coordinator's state is in
// __transaction_state: after a restart the same transactional ID keeps
// its producer ID with the next epoch, and a transaction left open before
// the restart is aborted when the ID is initialized again.
func TestTxnStateSurvivesRestart(t *testing.T) {
	b := testBroker(t)
	cfg := b.cfg
	cl := testClient(t, b)
	createTopic(t, cl, "rs", 1, nil)
	p := txnProducer(t, b, "rs-1", "rs")
	produceTxn(t, p, true, "before")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(context.Background(), &kgo.Record{Value: []byte("open at restart")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	id := "rs-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	p.Close()
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2)
	if lso := listOffsetIso(t, cl2, "rs", true); lso != 2 {
		t.Fatalf("after restart read_committed latest %d, want 2 (the open transaction holds it)", lso)
	}
	p2 := txnProducer(t, b2, "rs-1", "rs")
	produceTxn(t, p2, true, "after")
	if got, want := consumeValues(t, b2, "rs", true, 2, 10*time.Second), []string{"before", "after"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed read %q, want %q", got, want)
	}
	_ = fmt.Sprint
}

// TestTxnDescribeListProducers: DescribeTransactions, ListTransactions
// and DescribeProducers through kadm show an open transaction, its
// partitions and its first offset.
func TestTxnDescribeListProducers(t *testing.T) {
	b := testBroker(t)
	admCl := testClient(t, b)
	createTopic(t, admCl, "desc", 1, nil)
	adm := kadm.NewClient(admCl)
	ctx := context.Background()
	p := txnProducer(t, b, "desc-1", "desc")
	produceTxn(t, p, true, "x")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ds, err := adm.DescribeTransactions(ctx, "desc-1", "nope")
	if err != nil {
		t.Fatal(err)
	}
	d := ds["desc-1"]
	if d.Err != nil || d.State != "Ongoing" || !slices.Equal(d.Topics.Sorted()[0].Partitions, []int32{0}) || d.Topics.Sorted()[0].Topic != "desc" {
		t.Fatalf("describe: %+v", d)
	}
	if !errors.Is(ds["nope"].Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe of an unknown ID: %v", ds["nope"].Err)
	}
	ls, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if l := ls.Sorted(); len(l) != 1 || l[0].TxnID != "desc-1" || l[0].ProducerID != d.ProducerID {
		t.Fatalf("list ongoing: %+v", l)
	}
	if ls, err := adm.ListTransactions(ctx, nil, []string{"CompleteAbort"}); err != nil || len(ls.Sorted()) != 0 {
		t.Fatalf("list CompleteAbort: %+v %v", ls.Sorted(), err)
	}
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"desc": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	ps.EachProducer(func(dp kadm.DescribedProducer) {
		if dp.ProducerID == d.ProducerID {
			found = true
			if dp.CurrentTxnStartOffset != 2 { // x, commit marker, then open
				t.Errorf("producer's transaction starts at %d, want 2", dp.CurrentTxnStartOffset)
			}
		}
	})
	if !found {
		t.Fatalf("describe producers: %+v", ps)
	}
}

// TestTxnProduceRacingEndTxn: a transactional batch whose check passed
// while its transaction was open, but that reaches the log after EndTxn
// wrote the marker (a delayed produce), is refused: it would open a
// transaction on the partition that no coordinator knows about and hold
// the last stable offset back forever (KIP-890 part 1's hanging
// transaction). The transaction check runs under the log's append lock,
// with the markers.
func TestTxnProduceRacingEndTxn(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b, pinEndTxnV4)
	createTopic(t, cl, "race", 1, nil)
	id := "race-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	ir := request[*kmsg.InitProducerIDResponse](t, cl, init)
	if ir.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "race", Partitions: []int32{0}}}
	if ar := addPartitionsV3(t, cl, add); ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partitions: %v", kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
	}
	produce := func(seq int32) int16 {
		batch := recordtest.Build(recordtest.Options{Transactional: true, Producer: &recordtest.Producer{ID: ir.ProducerID, Epoch: ir.ProducerEpoch, BaseSequence: seq}},
			recordtest.Rec{Value: []byte("v"), Timestamp: time.Now().UnixMilli()})
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "race", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
		return request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(0); code != 0 {
		t.Fatalf("produce in the transaction: %v", kerr.ErrorForCode(code))
	}
	// The next produce is delayed between its checks and its append:
	// the transaction commits meanwhile.
	other := testClient(t, b, pinEndTxnV4)
	fired := false
	produceHook = func(*partition) {
		if fired {
			return
		}
		fired = true
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, ir.ProducerID, ir.ProducerEpoch, true
		if r := request[*kmsg.EndTxnResponse](t, other, end); r.ErrorCode != 0 {
			t.Errorf("end txn: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	t.Cleanup(func() { produceHook = nil })
	if code := produce(1); code != kerr.InvalidTxnState.Code {
		t.Errorf("produce that reached the log after the commit marker: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	produceHook = nil
	lso, hw := listOffsetIso(t, cl, "race", true), listOffsetIso(t, cl, "race", false)
	if lso != hw {
		t.Fatalf("read_committed latest %d, high watermark %d: a transaction hangs on the partition", lso, hw)
	}
}

// TestTxnOffsetCommitSurvivesRestart: a transaction's offsets are in
// __consumer_offsets (a transactional batch of the producer) before
// TxnOffsetCommit answers: after a restart they are still pending, and
// the transaction's commit makes them visible.
func TestTxnOffsetCommitSurvivesRestart(t *testing.T) {
	b := testBroker(t)
	cfg := b.cfg
	cl := testClient(t, b)
	createTopic(t, cl, "in", 1, nil)
	id, g := "off-rs", "g-rs"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	ir := request[*kmsg.InitProducerIDResponse](t, cl, init)
	if ir.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, ir.ProducerID, ir.ProducerEpoch, g
	if r := request[*kmsg.AddOffsetsToTxnResponse](t, cl, add); r.ErrorCode != 0 {
		t.Fatalf("add offsets: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = id, g, ir.ProducerID, ir.ProducerEpoch, -1
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
	if r := request[*kmsg.TxnOffsetCommitResponse](t, cl, tc); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("txn offset commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2)
	fetch := func(stable bool) (int64, int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = stable
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "in", Partitions: []int32{0}}}}}
		for {
			resp := request[*kmsg.OffsetFetchResponse](t, cl2, req)
			if resp.Groups[0].ErrorCode == kerr.CoordinatorLoadInProgress.Code {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			sp := resp.Groups[0].Topics[0].Partitions[0]
			return sp.Offset, sp.ErrorCode
		}
	}
	if off, code := fetch(true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after restart, require stable: %d %v, want UNSTABLE_OFFSET_COMMIT (the pending offset was lost)", off, kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, ir.ProducerID, ir.ProducerEpoch, true
	for {
		r := request[*kmsg.EndTxnResponse](t, cl2, end)
		if r.ErrorCode == kerr.CoordinatorLoadInProgress.Code || r.ErrorCode == kerr.ConcurrentTransactions.Code {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if r.ErrorCode != 0 {
			t.Fatalf("end txn: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		break
	}
	if off, code := fetch(true); off != 7 || code != 0 {
		t.Fatalf("after commit: %d %v, want 7", off, kerr.ErrorForCode(code))
	}
}

// pinEndTxnV4 keeps a raw client at Kafka 3.9's versions: EndTxn v4,
// without KIP-890 part 2's epoch bump per transaction.
var pinEndTxnV4 = kgo.MaxVersions(kversion.V3_9_0())

// TestTxnEndTxnV5BumpsEpoch is KIP-890 part 2 over the wire: EndTxn v5
// answers with the bumped epoch; its retry succeeds with the same answer;
// the markers carry the bumped epoch, so the next transaction produces
// with it; and the first transaction's EndTxn arriving late, after the
// next one began (Jepsen's delayed commit), is fenced instead of
// committing the open transaction.
func TestTxnEndTxnV5BumpsEpoch(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "v5", 1, nil)
	id := "v5-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	ir := request[*kmsg.InitProducerIDResponse](t, cl, init)
	if ir.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	pid, e0 := ir.ProducerID, ir.ProducerEpoch
	txnOn := func(epoch int16, value string) {
		t.Helper()
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
		add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "v5", Partitions: []int32{0}}}
		if ar := addPartitionsV3(t, cl, add); ar.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("add partitions at epoch %d: %v", epoch, kerr.ErrorForCode(ar.Topics[0].Partitions[0].ErrorCode))
		}
		batch := recordtest.Build(recordtest.Options{Transactional: true, Producer: &recordtest.Producer{ID: pid, Epoch: epoch}},
			recordtest.Rec{Value: []byte(value), Timestamp: time.Now().UnixMilli()})
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "v5", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
		if code := request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce at epoch %d: %v", epoch, kerr.ErrorForCode(code))
		}
	}
	end := func(epoch int16, commit bool) *kmsg.EndTxnResponse {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		r := request[*kmsg.EndTxnResponse](t, cl, req)
		if r.Version < 5 {
			t.Fatalf("EndTxn went as v%d, want v5", r.Version)
		}
		return r
	}

	txnOn(e0, "first")
	r := end(e0, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != e0+1 {
		t.Fatalf("EndTxn v5 commit: %v producer %d epoch %d, want %d/%d", kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch, pid, e0+1)
	}
	if r := end(e0, true); r.ErrorCode != 0 || r.ProducerEpoch != e0+1 {
		t.Fatalf("retried EndTxn v5: %v epoch %d, want ok %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, e0+1)
	}
	txnOn(e0+1, "second")
	if r := end(e0, true); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("delayed EndTxn of the first transaction during the second: %v, want PRODUCER_FENCED", kerr.ErrorForCode(r.ErrorCode))
	}
	if lso, hw := listOffsetIso(t, cl, "v5", true), listOffsetIso(t, cl, "v5", false); lso >= hw {
		t.Fatalf("read_committed latest %d, high watermark %d: the second transaction is no longer open", lso, hw)
	}
	if r := end(e0+1, false); r.ErrorCode != 0 || r.ProducerEpoch != e0+2 {
		t.Fatalf("abort of the second: %v epoch %d, want ok %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, e0+2)
	}
	if got := consumeValues(t, b, "v5", true, 1, 10*time.Second); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("read_committed read %q, want only the first transaction's record", got)
	}
	if lso, hw := listOffsetIso(t, cl, "v5", true), listOffsetIso(t, cl, "v5", false); lso != hw {
		t.Fatalf("read_committed latest %d, high watermark %d after the abort", lso, hw)
	}
}

// TestTxnAddPartitionsV4 is AddPartitionsToTxn v4, the batched
// broker-to-broker form: one request carries several transactions; a
// VerifyOnly transaction is answered without changing anything (0 for a
// partition in the ongoing transaction, INVALID_TXN_STATE for one not
// added, the fencing code for a stale epoch), and one without VerifyOnly
// adds its partitions.
func TestTxnAddPartitionsV4(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "v4", 3, nil)
	initID := func(id string) *kmsg.InitProducerIDResponse {
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
		ir := request[*kmsg.InitProducerIDResponse](t, cl, init)
		if ir.ErrorCode != 0 {
			t.Fatalf("init %s: %v", id, kerr.ErrorForCode(ir.ErrorCode))
		}
		return ir
	}
	a, c := initID("v4-a"), initID("v4-c")
	txnOf := func(id string, ir *kmsg.InitProducerIDResponse, epoch int16, verify bool, parts ...int32) kmsg.AddPartitionsToTxnRequestTransaction {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, ir.ProducerID, epoch, verify
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "v4", Partitions: parts}}
		return tx
	}
	send := func(txns ...kmsg.AddPartitionsToTxnRequestTransaction) map[string][]int16 {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Transactions = txns
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.cfg.NodeID)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != 4 || resp.ErrorCode != 0 {
			t.Fatalf("response v%d, error %v", resp.Version, kerr.ErrorForCode(resp.ErrorCode))
		}
		out := map[string][]int16{}
		for _, rt := range resp.Transactions {
			for _, st := range rt.Topics {
				for _, sp := range st.Partitions {
					out[rt.TransactionalID] = append(out[rt.TransactionalID], sp.ErrorCode)
				}
			}
		}
		return out
	}
	// Add partition 0 to a's transaction and 1 to c's, in one request.
	got := send(txnOf("v4-a", a, a.ProducerEpoch, false, 0), txnOf("v4-c", c, c.ProducerEpoch, false, 1))
	if want := map[string][]int16{"v4-a": {0}, "v4-c": {0}}; !cmpCodes(got, want) {
		t.Fatalf("add: %v, want %v", got, want)
	}
	got = send(txnOf("v4-a", a, a.ProducerEpoch, true, 0, 1), txnOf("v4-c", c, c.ProducerEpoch-1, true, 1))
	want := map[string][]int16{"v4-a": {0, kerr.InvalidTxnState.Code}, "v4-c": {kerr.ProducerFenced.Code}}
	if !cmpCodes(got, want) {
		t.Fatalf("verify: %v, want %v", got, want)
	}
	// VerifyOnly added nothing: partition 1 is still not in a's transaction.
	if got := send(txnOf("v4-a", a, a.ProducerEpoch, true, 1)); !cmpCodes(got, map[string][]int16{"v4-a": {kerr.InvalidTxnState.Code}}) {
		t.Fatalf("a verification added a partition: %v", got)
	}
}

func cmpCodes(a, b map[string][]int16) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestTxnIDExpires: transactional.id.expiration.ms. An ID without a
// transaction for longer is forgotten: DescribeTransactions no longer
// finds it, ListTransactions no longer lists it, its next InitProducerId
// gets a new producer ID, and a restart does not bring it back (the
// tombstone). An ID in an open transaction does not expire.
func TestTxnIDExpires(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) {
		c.TransactionalIDExpirationMs = 500
		c.TransactionRemoveExpiredTransactionCleanupIntervalMs = 100
	})
	cfg := b.cfg
	cl := testClient(t, b)
	createTopic(t, cl, "exp", 1, nil)
	p := txnProducer(t, b, "exp-1", "exp")
	produceTxn(t, p, true, "x")
	open := txnProducer(t, b, "exp-open", "exp")
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(context.Background(), &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	describe := func(id string) (int64, error) {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return -1, err
		}
		d, ok := ds[id]
		if !ok {
			return -1, fmt.Errorf("no answer for %s", id)
		}
		return d.ProducerID, d.Err
	}
	pid, err := describe("exp-1")
	if err != nil {
		t.Fatalf("describe before expiry: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := describe("exp-1")
		if errors.Is(err, kerr.TransactionalIDNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exp-1 still known 20 s after its expiration (500 ms): %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := describe("exp-open"); err != nil {
		t.Fatalf("the ID in an open transaction expired: %v", err)
	}
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ls.TransactionalIDs(), "exp-1") || !slices.Contains(ls.TransactionalIDs(), "exp-open") {
		t.Fatalf("ListTransactions: %v, want exp-open without exp-1", ls.TransactionalIDs())
	}
	p.Close()
	open.Close()
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.TransactionalIDExpirationMs = 1 << 40 // nothing more expires
	b2 := startBroker(t, cfg)
	cl2 := testClient(t, b2)
	id := "exp-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	ir := request[*kmsg.InitProducerIDResponse](t, cl2, init)
	if ir.ErrorCode != 0 || ir.ProducerID == pid || ir.ProducerEpoch != 0 {
		t.Fatalf("init after expiry and restart: %v producer %d epoch %d, want a new producer ID (not %d) at epoch 0",
			kerr.ErrorForCode(ir.ErrorCode), ir.ProducerID, ir.ProducerEpoch, pid)
	}
}

// TestTxnCompactedTopic: a compacted topic with committed and aborted
// transactions, cleaned by the broker's cleaner: the aborted records are
// removed from the log, and afterwards read_committed and
// read_uncommitted consumers both see exactly the latest committed record
// of every key, with the last stable offset at the high watermark.
func TestTxnCompactedTopic(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) { c.LogCleanerBackoffMs = 50 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := testClient(t, b)
	createTopic(t, cl, "txc", 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"delete.retention.ms":       kadm.StringPtr("100"),
	})
	p := txnProducer(t, b, "txc-1", "txc")
	txn := func(commit bool, kvs ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(kvs); i += 2 {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "k1", "c1", "k2", "c1")
	txn(false, "k1", "aborted", "k3", "aborted")
	txn(true, "k2", "c2")
	plain := testClient(t, b, kgo.DefaultProduceTopic("txc"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	filler := make([]byte, 600)
	for i := range 8 {
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "f%d", i), Value: filler}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	part := b.meta.Load().byName["txc"].partitions[0]
	if err := part.log.Roll(); err != nil {
		t.Fatal(err)
	}
	read := func(committed bool) map[string]string {
		t.Helper()
		iso := kgo.ReadUncommitted()
		if committed {
			iso = kgo.ReadCommitted()
		}
		c := testClient(t, b, kgo.ConsumeTopics("txc"), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
		out := map[string]string{}
		rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond) // a local broker answers within FetchMaxWait
		defer cancel()
		for rctx.Err() == nil {
			c.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
				if k := string(r.Key); k[0] == 'k' {
					if prev, dup := out[k]; dup {
						out[k] = prev + "," + string(r.Value)
					} else {
						out[k] = string(r.Value)
					}
				}
			})
		}
		return out
	}
	want := map[string]string{"k1": "c1", "k2": "c2"}
	for {
		got := read(false)
		if maps.Equal(got, want) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("read_uncommitted after cleaning: %v, want %v (the aborted records and superseded values removed)", got, want)
		}
	}
	if got := read(true); !maps.Equal(got, want) {
		t.Fatalf("read_committed after cleaning: %v, want %v", got, want)
	}
	if lso, hw := listOffsetIso(t, cl, "txc", true), listOffsetIso(t, cl, "txc", false); lso != hw {
		t.Fatalf("last stable offset %d, high watermark %d after cleaning", lso, hw)
	}
}

// addPartitionsV3 sends AddPartitionsToTxn as a client does: through
// franz-go's sharder, which caps it at v3 (v4+ is broker to broker).
func addPartitionsV3(t *testing.T, cl *kgo.Client, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	t.Helper()
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("add partitions: %v", err)
	}
	if len(resp.Topics) == 0 {
		t.Fatalf("add partitions: empty v%d answer", resp.Version)
	}
	return resp
}
