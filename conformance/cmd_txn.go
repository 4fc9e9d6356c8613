package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/conformance/checker"
)

const txnUsage = `txn start NAME TXNID [-timeout D] [-user U]
txn begin NAME
txn produce NAME TOPIC [-n N] [-partition P] [-keys K] [-history FILE] [-expect ok|ERR]
txn commit-offsets NAME GROUP TOPIC PART OFFSET [-expect ok|ERR]
txn commit|abort NAME [-history FILE] [-expect ok|ERR]`

// txnProducer is one transactional franz-go producer of a script.
type txnProducer struct {
	name, id string
	cl       *kgo.Client
	n        int    // transactions begun
	cur      string // the open transaction's history name ("NAME-n")
	sent     int    // records sent, for unique values
}

// txn start|begin|produce|commit-offsets|commit|abort: a transactional
// producer (KIP-98). start makes the producer with transactional.id
// TXNID and initializes it (InitProducerId: this fences an older
// producer with the same ID); begin opens a transaction; produce sends
// records in it (values NAME-tK-i, recorded with the transaction's
// name); commit-offsets adds a consumer group's offset to it
// (AddOffsetsToTxn, TxnOffsetCommit); commit and abort end it (EndTxn),
// recorded as an end-txn operation. -expect names the Kafka error a
// step must fail with (or ok).
func cmdTxn(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("txn: state expected errors with -expect instead of !")
	}
	if len(args) < 2 {
		ts.Fatalf("usage:\n%s", txnUsage)
	}
	s := st(ts)
	fs := flag.NewFlagSet("txn", flag.ContinueOnError)
	expect := fs.String("expect", "ok", "ok or Kafka error names separated by |")
	history := fs.String("history", "history.jsonl", "history file")
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	if args[0] == "start" {
		timeout := fs.Duration("timeout", 60*time.Second, "transaction.timeout.ms")
		user := fs.String("user", "", "SASL user")
		pos := parse(ts, fs, args[1:], 2, txnUsage)
		if s.txns[pos[0]] != nil {
			ts.Fatalf("txn: producer %q exists", pos[0])
		}
		opts := append(s.clientOpts(s.needCluster(ts), *user), kgo.TransactionalID(s.suite.Prefix+pos[1]),
			kgo.TransactionTimeout(*timeout), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(20*time.Second))
		cl, err := kgo.NewClient(opts...)
		ts.Check(err)
		if s.txns == nil {
			s.txns = map[string]*txnProducer{}
		}
		s.txns[pos[0]] = &txnProducer{name: pos[0], id: pos[1], cl: cl}
		_, _, err = cl.ProducerID(ctx)
		expectErr(ts, "txn start", err, *expect)
		return
	}
	t := s.txns[args[1]]
	if t == nil {
		ts.Fatalf("txn: no producer %q (txn start first)", args[1])
	}
	switch args[0] {
	case "begin":
		parse(ts, fs, args[1:], 1, txnUsage)
		err := t.cl.BeginTransaction()
		if err == nil {
			t.n++
			t.cur = fmt.Sprintf("%s-t%d", t.name, t.n)
		}
		expectErr(ts, "txn begin", err, *expect)
	case "produce":
		n := fs.Int("n", 10, "records")
		part := fs.Int("partition", 0, "partition (without -keys)")
		keys := fs.Int("keys", 0, "spread over K keys and every partition (k mod partitions)")
		pos := parse(ts, fs, args[1:], 2, txnUsage)
		topic := s.topic(ts, pos[1])
		nparts := int32(1)
		if *keys > 0 {
			m, err := metadata(s.client(ts), []string{topic})
			ts.Check(err)
			if len(m.Topics) == 1 {
				nparts = int32(len(m.Topics[0].Partitions))
			}
		}
		rec, err := checker.Create(s.path(*history), t.name, s.clock)
		ts.Check(err)
		acked, failed := 0, 0
		var first error
		for i := range *n {
			v := fmt.Sprintf("%s-%d", t.cur, t.sent)
			t.sent++
			r := &kgo.Record{Topic: topic, Partition: int32(*part), Value: []byte(v)}
			if *keys > 0 {
				r.Key = []byte(fmt.Sprintf("k%d", i%*keys))
				r.Partition = int32(i%*keys) % nparts
			}
			op := rec.Invoke(checker.Op{F: checker.Send, Topic: topic, Partition: r.Partition, Offset: -1, Value: v, Txn: t.cur})
			res := t.cl.ProduceSync(ctx, r)
			got, err := res.First()
			typ := checker.OK
			if err != nil {
				typ, op.Error = checker.Info, err.Error()
				if kerrName(err) != "" {
					typ = checker.Fail
				}
				failed++
				if first == nil {
					first = err
				}
			} else {
				op.Partition, op.Offset = got.Partition, got.Offset
				acked++
			}
			rec.Complete(op, typ)
		}
		ts.Check(rec.Close())
		fmt.Fprintf(ts.Stdout(), "produced %d in %s: acked=%d failed=%d\n", *n, t.cur, acked, failed)
		expectErr(ts, "txn produce", first, *expect)
	case "commit-offsets":
		pos := parse(ts, fs, args[1:], 5, txnUsage)
		err := t.commitOffsets(ctx, s.group(pos[1]), s.topic(ts, pos[2]), atoi32(ts, pos[3]), int64(atoi32(ts, pos[4])))
		expectErr(ts, "txn commit-offsets", err, *expect)
	case "commit", "abort":
		parse(ts, fs, args[1:], 1, txnUsage)
		rec, err := checker.Create(s.path(*history), t.name, s.clock)
		ts.Check(err)
		op := rec.Invoke(checker.Op{F: checker.EndTxn, Txn: t.cur, Value: args[0], Offset: -1})
		how := kgo.TryCommit
		if args[0] == "abort" {
			how = kgo.TryAbort
		}
		if args[0] == "commit" {
			err = t.cl.Flush(ctx)
		}
		if err == nil {
			err = t.cl.EndTransaction(ctx, how)
		} else {
			_ = t.cl.AbortBufferedRecords(ctx)
		}
		typ := checker.OK
		if err != nil {
			typ, op.Error = checker.Info, err.Error()
			if kerrName(err) != "" {
				typ = checker.Fail // the coordinator refused: the transaction did not commit
			}
		}
		rec.Complete(op, typ)
		ts.Check(rec.Close())
		expectErr(ts, "txn "+args[0], err, *expect)
	default:
		ts.Fatalf("usage:\n%s", txnUsage)
	}
}

// commitOffsets adds group's offset for topic/part to the open
// transaction: AddOffsetsToTxn to the transaction coordinator, then
// TxnOffsetCommit (generation -1: not a group member) to the group's.
func (t *txnProducer) commitOffsets(ctx context.Context, group, topic string, part int32, offset int64) error {
	id, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = t.idFull(), id, epoch, group
	ar, err := add.RequestWith(ctx, coord(t.cl))
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
		return err
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = t.idFull(), group, id, epoch
	req.Generation, req.MemberID = -1, ""
	m, err := metadata(t.cl, []string{topic})
	if err != nil || len(m.Topics) != 1 {
		return fmt.Errorf("metadata %s: %v", topic, err)
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, m.Topics[0].TopicID // by name (v0-5) or ID (v6+)
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = part, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, coord(t.cl))
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// idFull is the transactional.id as sent (with the suite's prefix).
func (t *txnProducer) idFull() string {
	for _, o := range t.cl.OptValues(kgo.TransactionalID) {
		if s, ok := o.(string); ok {
			return s
		}
	}
	return t.id
}

// kerrName is the Kafka error name inside err ("" if none).
func kerrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return ""
}

// kerrCode is the Kafka error code inside err (0 if none).
func kerrCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return 0
}

// expectErr fails the script unless err matches expect ("ok" or Kafka
// error names separated by |), printing what happened.
func expectErr(ts *testscript.TestScript, what string, err error, expect string) {
	got := "ok"
	if err != nil {
		got = kerrName(err)
		if got == "" {
			got = "error"
		}
	}
	fmt.Fprintf(ts.Stdout(), "%s: %s\n", what, got)
	if !slices.Contains(strings.Split(expect, "|"), got) {
		ts.Fatalf("%s: got %s (%v), want %s", what, got, err, expect)
	}
}
