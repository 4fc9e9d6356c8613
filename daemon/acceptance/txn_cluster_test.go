package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record/recordtest"
)

// TestTransactionsClusterCoordinatorKill9: three brokers, RF=3. A
// transactional producer writes to three partitions led by different
// brokers (markers go in process and by WriteTxnMarkers), commits and
// aborts; then the transaction coordinator is kill -9ed and the producer
// goes on with the coordinator that takes over its __transaction_state
// partition. read_committed sees every committed record once, in order,
// and nothing aborted.
func TestTransactionsClusterCoordinatorKill9(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"transaction.state.log.num.partitions": "3"})
	createReplicated(t, c, "txn-rf3", 3, 3, nil)
	ctx := testCtx(t, 3*time.Minute)
	// The producer's own log, printed only if the test fails: a failure
	// seen once under load ("c2: produce: unknown broker") comes from
	// inside the client, and its log says which request gave up.
	plog := &syncLog{}
	newProducer := func() *kgo.Client {
		return clusterClient(t, c, kgo.TransactionalID("rf3"), kgo.DefaultProduceTopic("txn-rf3"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second),
			kgo.RetryTimeout(60*time.Second), kgo.WithLogger(kgo.BasicLogger(plog, kgo.LogLevelInfo, nil)))
	}
	p := newProducer()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transactional producer log:\n%s", plog.String())
		}
	})
	want := map[int32][]string{}
	// try runs one transaction; want gains its records once it commits.
	try := func(name string, commit bool) error {
		if err := p.BeginTransaction(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		pending := map[int32][]string{}
		for i := range 6 {
			r := &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprintf("%s-%d", name, i))}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			pending[r.Partition] = append(pending[r.Partition], string(r.Value))
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return fmt.Errorf("end (commit %v): %w", commit, err)
		}
		if commit {
			for part, vs := range pending {
				want[part] = append(want[part], vs...)
			}
		}
		return nil
	}
	// run retries a failed transaction with a new producer, as an
	// application does after a fatal producer error: when the killed
	// coordinator drops out of franz-go's metadata while an
	// AddPartitionsToTxn to it is being retried, the client fails the
	// produce with "unknown broker" and its producer ID for good (seen
	// under load; the log printed on failure shows it). The new
	// producer's InitProducerID, same transactional.id, fences the old
	// one and aborts its open transaction. The retry writes the same
	// values, so a record of the failed attempt that showed up in
	// read_committed would be a duplicate the check below catches.
	run := func(name string, commit bool) {
		t.Helper()
		for attempt := 1; ; attempt++ {
			err := try(name, commit)
			if err == nil {
				return
			}
			if attempt == 3 {
				t.Fatalf("%s: %v (attempt %d)", name, err, attempt)
			}
			t.Logf("%s: attempt %d: %v; retrying with a new producer", name, attempt, err)
			p.Close()
			p = newProducer()
		}
	}
	run("c1", true)
	run("a1", false)

	// The coordinator: FindCoordinator for the transactional ID.
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = 1, []string{"rf3"}
	var coord int32 = -1
	waitUntil(t, 30*time.Second, "the transaction coordinator", func() error {
		resp, err := req.RequestWith(ctx, clusterClient(t, c))
		if err != nil {
			return err
		}
		if len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
			return fmt.Errorf("find coordinator: %+v", resp.Coordinators)
		}
		coord = resp.Coordinators[0].NodeID
		return nil
	})
	t.Logf("kill -9 transaction coordinator %d", coord)
	c.Broker(coord).Kill9()
	// Until the controller moves the __transaction_state partition, a
	// client's FindCoordinator gets COORDINATOR_NOT_AVAILABLE, and
	// franz-go's own retries may run out first on a loaded machine: wait
	// for the new coordinator, as an application would retry.
	var alive []string
	for _, b := range c.Brokers() {
		if b.NodeID() != coord {
			alive = append(alive, b.Addr())
		}
	}
	// Ask every surviving broker: one that has not yet seen the kill
	// still names the dead coordinator, while the producer's metadata
	// from another no longer lists it, and franz-go fails the produce
	// with "unknown broker" rather than retry. Wait until all agree.
	var pinned []*kgo.Broker
	for _, a := range alive {
		pinned = append(pinned, newClient(t, a).SeedBrokers()[0])
	}
	waitUntil(t, 60*time.Second, "a new transaction coordinator on every broker", func() error {
		for i, b := range pinned {
			resp, err := b.Request(ctx, req)
			if err != nil {
				return fmt.Errorf("%s: %w", alive[i], err)
			}
			co := resp.(*kmsg.FindCoordinatorResponse).Coordinators[0]
			if co.ErrorCode != 0 || co.NodeID == coord {
				return fmt.Errorf("%s: coordinator %d, %v", alive[i], co.NodeID, kerr.ErrorForCode(co.ErrorCode))
			}
			mresp, err := b.Request(ctx, kmsg.NewPtrMetadataRequest())
			if err != nil {
				return fmt.Errorf("%s: %w", alive[i], err)
			}
			for _, mb := range mresp.(*kmsg.MetadataResponse).Brokers {
				if mb.NodeID == coord {
					return fmt.Errorf("%s: metadata still lists the killed broker %d", alive[i], coord)
				}
			}
		}
		return nil
	})

	run("c2", true)
	run("a2", false)
	run("c3", true)

	cl := newClient(t, alive[0], kgo.SeedBrokers(alive...), kgo.ConsumeTopics("txn-rf3"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[int32][]string{}
	n, total := 0, 0
	for _, v := range want {
		total += len(v)
	}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for n < total && pctx.Err() == nil {
		fs := cl.PollFetches(pctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if pctx.Err() == nil && !kerr.IsRetriable(err) {
				t.Logf("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for part := range int32(3) {
		if !slices.Equal(got[part], want[part]) {
			t.Errorf("partition %d: read_committed read %q, want %q", part, got[part], want[part])
		}
	}
}

// TestTransactionsClusterProduceCheck: KIP-890 part 1 across brokers. A
// transactional batch sent to a partition leader that is not the
// transaction coordinator is checked with the coordinator: refused while
// the partition is not in the transaction, accepted once it is.
func TestTransactionsClusterProduceCheck(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"transaction.state.log.num.partitions": "3"})
	createReplicated(t, c, "txn-check", 3, 3, nil)
	ctx := testCtx(t, 2*time.Minute)
	cl := clusterClient(t, c)
	id := "check-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	var ir *kmsg.InitProducerIDResponse
	waitUntil(t, 30*time.Second, "init producer id", func() error {
		r, err := init.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
		ir = r
		return err
	})
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{id}
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil || fr.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %+v", err, fr)
	}
	coord := fr.Coordinators[0].NodeID
	part, leader := int32(-1), int32(-1)
	for i := range int32(3) {
		if l := waitLeader(t, c, "txn-check", i, -1); l != coord {
			part, leader = i, l
			break
		}
	}
	if part < 0 {
		t.Skip("the coordinator leads every partition of the topic")
	}
	produce := func(seq int32) int16 {
		t.Helper()
		batch := txnBatch(ir.ProducerID, ir.ProducerEpoch, seq)
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "txn-check", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: part, Records: batch}}}}
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			t.Fatalf("produce to broker %d: %v", leader, err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(0); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce to partition %d (leader %d, coordinator %d) outside the transaction: %v, want INVALID_TXN_STATE", part, leader, coord, kerr.ErrorForCode(code))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "txn-check", Partitions: []int32{part}}}
	ar, err := add.RequestWith(ctx, cl)
	if err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partitions: %v %+v", err, ar)
	}
	if code := produce(0); code != 0 {
		t.Fatalf("produce to a partition in the transaction: %v", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, ir.ProducerID, ir.ProducerEpoch, false
	if er, err := end.RequestWith(ctx, cl); err != nil || er.ErrorCode != 0 {
		t.Fatalf("end txn: %v %+v", err, er)
	}
}

// txnBatch is one transactional record for producer pid at epoch.
func txnBatch(pid int64, epoch int16, seq int32) []byte {
	return recordtest.Build(recordtest.Options{Transactional: true, Producer: &recordtest.Producer{ID: pid, Epoch: epoch, BaseSequence: seq}},
		recordtest.Rec{Value: []byte("v"), Timestamp: time.Now().UnixMilli()})
}

// TestTransactionsIdleIDAbortedAfterCoordinatorKill9: a producer opens a
// transaction on a partition and goes silent; its coordinator is kill
// -9ed. Nothing asks the new coordinator about the ID, yet it must load
// the ID's state when it takes the __transaction_state partition over,
// as Kafka's does on election, and abort the transaction at its timeout:
// otherwise the transaction hangs and holds the partition's last stable
// offset (and read_committed consumers) forever.
func TestTransactionsIdleIDAbortedAfterCoordinatorKill9(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		"transaction.state.log.num.partitions":                        "3",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
	})
	createReplicated(t, c, "txn-idle", 1, 3, nil)
	ctx := testCtx(t, 3*time.Minute)
	cl := clusterClient(t, c)
	id := "idle-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 3000
	var ir *kmsg.InitProducerIDResponse
	waitUntil(t, 30*time.Second, "init producer id", func() error {
		r, err := init.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
		ir = r
		return err
	})
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{id}
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil || fr.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("find coordinator: %v %+v", err, fr)
	}
	coord := fr.Coordinators[0].NodeID
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "txn-idle", Partitions: []int32{0}}}
	if ar, err := add.RequestWith(ctx, cl); err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add partitions: %v %+v", err, ar)
	}
	leader := waitLeader(t, c, "txn-idle", 0, -1)
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "txn-idle", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: txnBatch(ir.ProducerID, ir.ProducerEpoch, 0)}}}}
	if pr, err := req.RequestWith(ctx, cl.Broker(int(leader))); err != nil || pr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: %v %+v", err, pr)
	}
	t.Logf("kill -9 transaction coordinator %d (partition leader %d)", coord, leader)
	c.Broker(coord).Kill9()
	var alive []string
	for _, b := range c.Brokers() {
		if b.NodeID() != coord {
			alive = append(alive, b.Addr())
		}
	}
	adm := kadm.NewClient(newClient(t, alive[0], kgo.SeedBrokers(alive...)))
	waitUntil(t, 60*time.Second, "the open transaction aborted by the new coordinator", func() error {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lso, err := adm.ListCommittedOffsets(lctx, "txn-idle")
		if err == nil {
			err = lso.Error()
		}
		if err != nil {
			return err
		}
		hw, err := adm.ListEndOffsets(lctx, "txn-idle")
		if err == nil {
			err = hw.Error()
		}
		if err != nil {
			return err
		}
		l, _ := lso.Lookup("txn-idle", 0)
		h, _ := hw.Lookup("txn-idle", 0)
		if l.Offset < 2 || l.Offset != h.Offset {
			return fmt.Errorf("last stable offset %d, high watermark %d", l.Offset, h.Offset)
		}
		return nil
	})
}

// TestTransactionsCoordinatorLoadsOnElection: the broker that takes over
// a __transaction_state partition loads its transactional IDs at once, as
// Kafka does on election, not at the first request or the next timeout
// check (set to ten minutes here): the log of the new leader says so
// while no client asks about the ID.
func TestTransactionsCoordinatorLoadsOnElection(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		"transaction.state.log.num.partitions":                        "1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "600000",
	})
	ctx := testCtx(t, 2*time.Minute)
	cl := clusterClient(t, c)
	id := "elect-1"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	waitUntil(t, 30*time.Second, "init producer id", func() error {
		r, err := init.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
		return err
	})
	waitISR(t, c, "__transaction_state", 0, 3)
	old := waitLeader(t, c, "__transaction_state", 0, -1)
	t.Logf("kill -9 transaction coordinator %d", old)
	c.Broker(old).Kill9()
	next := waitLeader(t, c, "__transaction_state", 0, old)
	waitUntil(t, 30*time.Second, fmt.Sprintf("broker %d loading __transaction_state-0", next), func() error {
		if strings.Contains(c.Broker(next).Log(), `msg="broker: transaction coordinator loaded" partition=0 ids=1`) {
			return nil
		}
		return fmt.Errorf("not loaded yet")
	})
}

// syncLog is a bytes.Buffer a client's goroutines may write while the
// test reads it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
