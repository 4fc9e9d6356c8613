package conformance

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/conformance/checker"
	"github.com/vltava/vltava/core/record/recordtest"
)

const txnRawUsage = `txnraw init NAME TXNID
txnraw begin NAME
txnraw produce NAME TOPIC [-partition P] [-n N] [-history FILE] [-expect ok|ERR]
txnraw end NAME commit|abort [-history FILE] [-expect ok|ERR]
txnraw resend-end NAME [-expect ok|ERR]`

// rawTxn is a transactional producer built from hand-made requests, so a
// script controls exactly which request goes out with which epoch.
type rawTxn struct {
	name, id string
	pid      int64
	epoch    int16
	n        int    // transactions begun
	cur      string // the open transaction's history name
	sent     int
	seq      map[string]int32 // next sequence per topic/partition, at the current epoch
	added    map[string]bool  // partitions added to the open transaction
	lastEnd  *kmsg.EndTxnRequest
}

// txnraw init|begin|produce|end|resend-end: a transactional producer of
// hand-built requests (InitProducerId, AddPartitionsToTxn, Produce,
// EndTxn at the highest version both sides know). end adopts the epoch
// an EndTxn v5+ answers with (KIP-890 part 2). resend-end sends the last
// EndTxn again exactly as it went (a delayed duplicate, as a retry over
// another connection would arrive) and records nothing: if the broker
// wrongly applies it to the transaction open now, that transaction's
// later abort is contradicted by what read_committed returns, which
// check reports as aborted-read.
func cmdTxnRaw(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("txnraw: state expected errors with -expect instead of !")
	}
	if len(args) < 2 {
		ts.Fatalf("usage:\n%s", txnRawUsage)
	}
	s := st(ts)
	fs := flag.NewFlagSet("txnraw", flag.ContinueOnError)
	expect := fs.String("expect", "ok", "ok or Kafka error names separated by |")
	history := fs.String("history", "history.jsonl", "history file")
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	cl := s.client(ts)
	if args[0] == "init" {
		pos := parse(ts, fs, args[1:], 2, txnRawUsage)
		if s.rawTxns == nil {
			s.rawTxns = map[string]*rawTxn{}
		}
		t := &rawTxn{name: pos[0], id: s.suite.Prefix + pos[1]}
		s.rawTxns[pos[0]] = t
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &t.id, 60000
		resp, err := req.RequestWith(ctx, coord(cl))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			t.pid, t.epoch = resp.ProducerID, resp.ProducerEpoch
			fmt.Fprintf(ts.Stdout(), "producer %d epoch %d\n", t.pid, t.epoch)
		}
		expectErr(ts, "txnraw init", err, *expect)
		return
	}
	t := s.rawTxns[args[1]]
	if t == nil {
		ts.Fatalf("txnraw: no producer %q (txnraw init first)", args[1])
	}
	switch args[0] {
	case "begin":
		parse(ts, fs, args[1:], 1, txnRawUsage)
		t.n++
		t.cur, t.added = fmt.Sprintf("%s-r%d", t.name, t.n), map[string]bool{}
	case "produce":
		n := fs.Int("n", 1, "records")
		part := fs.Int("partition", 0, "partition")
		pos := parse(ts, fs, args[1:], 2, txnRawUsage)
		topic := s.topic(ts, pos[1])
		err := t.produce(ctx, cl, s, topic, int32(*part), *n, *history, ts)
		expectErr(ts, "txnraw produce", err, *expect)
	case "end":
		pos := parse(ts, fs, args[1:], 2, txnRawUsage)
		if pos[1] != "commit" && pos[1] != "abort" {
			ts.Fatalf("usage:\n%s", txnRawUsage)
		}
		rec, err := checker.Create(s.path(*history), t.name, s.clock)
		ts.Check(err)
		op := rec.Invoke(checker.Op{F: checker.EndTxn, Txn: t.cur, Value: pos[1], Offset: -1})
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = t.id, t.pid, t.epoch, pos[1] == "commit"
		resp, err := req.RequestWith(ctx, coord(cl))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		typ := checker.OK
		switch {
		case err != nil && kerrName(err) != "":
			typ, op.Error = checker.Fail, err.Error()
		case err != nil:
			typ, op.Error = checker.Info, err.Error()
		default:
			sent := *req
			t.lastEnd = &sent
			if resp.Version >= 5 { // KIP-890 part 2: continue with the bumped epoch
				if resp.ProducerID != t.pid || resp.ProducerEpoch != t.epoch {
					t.seq = nil
				}
				t.pid, t.epoch = resp.ProducerID, resp.ProducerEpoch
			}
			fmt.Fprintf(ts.Stdout(), "EndTxn v%d: producer %d epoch %d\n", resp.Version, t.pid, t.epoch)
		}
		rec.Complete(op, typ)
		ts.Check(rec.Close())
		expectErr(ts, "txnraw end", err, *expect)
	case "resend-end":
		parse(ts, fs, args[1:], 1, txnRawUsage)
		if t.lastEnd == nil {
			ts.Fatalf("txnraw resend-end: %s ended no transaction yet", t.name)
		}
		req := *t.lastEnd
		resp, err := req.RequestWith(ctx, coord(cl))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			fmt.Fprintf(ts.Stdout(), "EndTxn v%d resent (producer %d epoch %d commit %v)\n", resp.Version, req.ProducerID, req.ProducerEpoch, req.Commit)
		}
		expectErr(ts, "txnraw resend-end", err, *expect)
	default:
		ts.Fatalf("usage:\n%s", txnRawUsage)
	}
}

// produce adds topic/part to the open transaction (once) and sends n
// records, one batch each, recording them under the transaction's name.
func (t *rawTxn) produce(ctx context.Context, cl *kgo.Client, s *state, topic string, part int32, n int, history string, ts *testscript.TestScript) error {
	if t.cur == "" {
		ts.Fatalf("txnraw produce: no transaction begun")
	}
	key := fmt.Sprintf("%s/%d", topic, part)
	if !t.added[key] {
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch = t.id, t.pid, t.epoch
		add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{part}}}
		resp, err := add.RequestWith(ctx, coord(cl))
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		t.added[key] = true
	}
	if t.seq == nil {
		t.seq = map[string]int32{}
	}
	m, err := metadata(cl, []string{topic})
	if err != nil || len(m.Topics) != 1 {
		return fmt.Errorf("metadata %s: %v", topic, err)
	}
	// A Produce goes to the partition's leader: kgo sends a hand-built
	// request to any broker otherwise, and on a cluster that is rarely it.
	leader := int32(-1)
	for _, mp := range m.Topics[0].Partitions {
		if mp.Partition == part {
			leader = mp.Leader
		}
	}
	if leader < 0 {
		return fmt.Errorf("metadata %s: partition %d has no leader", topic, part)
	}
	rec, err := checker.Create(s.path(history), t.name, s.clock)
	ts.Check(err)
	defer func() { ts.Check(rec.Close()) }()
	for range n {
		v := fmt.Sprintf("%s-%d", t.cur, t.sent)
		t.sent++
		op := rec.Invoke(checker.Op{F: checker.Send, Topic: topic, Partition: part, Offset: -1, Value: v, Txn: t.cur})
		batch := recordtest.Build(recordtest.Options{Transactional: true,
			Producer: &recordtest.Producer{ID: t.pid, Epoch: t.epoch, BaseSequence: t.seq[key]}},
			recordtest.Rec{Value: []byte(v), Timestamp: time.Now().UnixMilli()})
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &t.id, -1, 10000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, TopicID: m.Topics[0].TopicID, // by name (v0-12) or ID (v13+)
			Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: part, Records: batch}}}}
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		var offset int64 = -1
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			rp := resp.Topics[0].Partitions[0]
			err, offset = kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset
		}
		typ := checker.OK
		switch {
		case err != nil && kerrName(err) != "":
			typ, op.Error = checker.Fail, err.Error()
		case err != nil:
			typ, op.Error = checker.Info, err.Error()
		default:
			op.Offset = offset
			t.seq[key]++
		}
		rec.Complete(op, typ)
		if err != nil {
			return err
		}
	}
	return nil
}
