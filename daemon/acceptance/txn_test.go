package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions (issue 11) with real clients against a real vltavad: each
// client's transactional producer commits and aborts, and a read_committed
// consumer of each client sees exactly the committed records, in order.

// franzTxn runs one franz-go transaction of values and commits or aborts it.
func franzTxn(ctx context.Context, cl *kgo.Client, commit bool, values ...string) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			return fmt.Errorf("produce %q: %w", v, err)
		}
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// saramaTxn runs one sarama transaction of values and commits or aborts it.
func saramaTxn(p sarama.SyncProducer, topic string, commit bool, values ...string) error {
	if err := p.BeginTxn(); err != nil {
		return err
	}
	for _, v := range values {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}); err != nil {
			return fmt.Errorf("send %q: %w", v, err)
		}
	}
	if commit {
		return p.CommitTxn()
	}
	return p.AbortTxn()
}

func TestTransactionsReadCommittedClients(t *testing.T) {
	d := startDaemon(t, nil)
	addr := d.Addr()
	ctx := testCtx(t, 2*time.Minute)
	createTopic(t, newAdmin(t, addr), "txn-clients", 1, nil)

	fp := newClient(t, addr, kgo.TransactionalID("txn-franz"), kgo.DefaultProduceTopic("txn-clients"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err := franzTxn(ctx, fp, true, "f1", "f2"); err != nil {
		t.Fatalf("franz-go commit: %v", err)
	}
	if err := franzTxn(ctx, fp, false, "f-aborted"); err != nil {
		t.Fatalf("franz-go abort: %v", err)
	}

	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Transaction.ID = "txn-sarama"
	cfg.Net.MaxOpenRequests = 1
	sp, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if err := saramaTxn(sp, "txn-clients", true, "s1"); err != nil {
		t.Fatalf("sarama commit: %v", err)
	}
	if err := saramaTxn(sp, "txn-clients", false, "s-aborted1", "s-aborted2"); err != nil {
		t.Fatalf("sarama abort: %v", err)
	}
	if err := saramaTxn(sp, "txn-clients", true, "s2"); err != nil {
		t.Fatalf("sarama commit: %v", err)
	}
	want := []string{"f1", "f2", "s1", "s2"}

	t.Run("franz-go", func(t *testing.T) {
		cl := newClient(t, addr, kgo.ConsumeTopics("txn-clients"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		var got []string
		for len(got) < len(want) && ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
	})
	t.Run("sarama", func(t *testing.T) {
		cfg := saramaConfig()
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
		c, err := sarama.NewConsumer([]string{addr}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		pc, err := c.ConsumePartition("txn-clients", 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		var got []string
		for len(got) < len(want) {
			select {
			case m := <-pc.Messages():
				got = append(got, string(m.Value))
			case err := <-pc.Errors():
				t.Fatal(err)
			case <-time.After(15 * time.Second):
				t.Fatalf("read %q, want %q", got, want)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
		select { // nothing aborted trails the committed records
		case m := <-pc.Messages():
			t.Fatalf("read %q after the committed records", m.Value)
		case <-time.After(time.Second):
		}
	})
	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Skip("kcat not installed (Debian package kcat)")
		}
		cmd := exec.CommandContext(ctx, kcat, "-C", "-b", addr, "-t", "txn-clients", "-X", "isolation.level=read_committed",
			"-o", "beginning", "-e", "-q", "-f", "%s\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat: %v: %s", err, stderr.String())
		}
		if got := strings.Fields(string(out)); !slices.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
	})
}

// TestTransactionsZombieFenced: two producers with one transactional ID;
// the newer fences the older, whose open transaction is aborted and whose
// later writes never become visible.
func TestTransactionsZombieFenced(t *testing.T) {
	d := startDaemon(t, nil)
	addr := d.Addr()
	ctx := testCtx(t, time.Minute)
	createTopic(t, newAdmin(t, addr), "txn-zombie", 1, nil)
	opts := []kgo.Opt{kgo.TransactionalID("txn-z"), kgo.DefaultProduceTopic("txn-zombie"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(3 * time.Second)}
	old := newClient(t, addr, opts...)
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, addr, opts...)
	if err := franzTxn(ctx, fresh, true, "fresh"); err != nil {
		t.Fatal(err)
	}
	perr := old.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	eerr := old.EndTransaction(ctx, kgo.TryCommit)
	if perr == nil && eerr == nil {
		t.Fatal("the fenced producer produced and committed")
	}
	cl := newClient(t, addr, kgo.ConsumeTopics("txn-zombie"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var got []string
	for pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"fresh"}) {
		t.Fatalf("read_committed read %q, want only the new instance's record", got)
	}
}

// TestTransactionsGroupTransactSession: franz-go's consume-transform-
// produce pipeline (GroupTransactSession: TxnOffsetCommit with the group's
// generation, offsets committed with the output): every input record is in
// the output once, read with read_committed, and the group's committed
// offset is the input's end.
func TestTransactionsGroupTransactSession(t *testing.T) {
	d := startDaemon(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	addr := d.Addr()
	ctx := testCtx(t, 2*time.Minute)
	adm := newAdmin(t, addr)
	createTopic(t, adm, "eos-in", 2, nil)
	createTopic(t, adm, "eos-out", 2, nil)
	const n = 200
	in := newClient(t, addr, kgo.DefaultProduceTopic("eos-in"))
	for i := range n {
		in.Produce(ctx, kgo.StringRecord(fmt.Sprintf("r%03d", i)), nil)
	}
	if err := in.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("eos-1"),
		kgo.ConsumerGroup("eos-g"), kgo.ConsumeTopics("eos-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("eos-out"), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done := 0
	for done < n && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, kgo.StringRecord("out-"+string(r.Value)), nil)
			done++
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if !committed {
			t.Fatal("the session aborted a transaction")
		}
	}
	out := newClient(t, addr, kgo.ConsumeTopics("eos-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	total := 0
	for total < n && ctx.Err() == nil {
		out.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	for i := range n {
		if v := fmt.Sprintf("out-r%03d", i); seen[v] != 1 {
			t.Errorf("%s in the output %d times", v, seen[v])
		}
	}
	offs, err := adm.FetchOffsets(ctx, "eos-g")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Fatalf("the group's committed offsets sum to %d, want %d", sum, n)
	}
}
