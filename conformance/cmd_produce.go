package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/conformance/checker"
)

const produceUsage = "produce TOPIC [-n N [-scaled]] [-size BYTES] [-keys K] [-partition P] [-acks 0|1|all] [-idempotent] [-rate N/s] [-history FILE] [-proc NAME] [-timeout D] [-hold D] [-allow-errors] [-compression C] [-headers N] [-user U] [-client-id ID] [&name&]"

// produceSpec is one produce command.
type produceSpec struct {
	topic      string
	n, size    int
	keys       int
	partition  int
	acks       string
	idempotent bool
	rate       int
	history    string
	proc       string
	timeout    time.Duration
	hold       time.Duration
	allowErrs  bool
	codec      string
	user       string
	headers    int
	clientID   string
}

// produce TOPIC ...: sends n records with unique values ("proc-i", padded
// to size), recording each send in the history file. It fails if any
// send failed or is unknown (acks=0 sends are unknown by nature and do
// not fail it). With &name& it runs in the background until 'await job'.
func cmdProduce(ts *testscript.TestScript, neg bool, args []string) {
	args, bg := background(args)
	s := st(ts)
	var p produceSpec
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.IntVar(&p.n, "n", 100, "records")
	fs.IntVar(&p.size, "size", 0, "pad values to this many bytes")
	fs.IntVar(&p.keys, "keys", 0, "use K distinct keys with the default partitioner")
	fs.IntVar(&p.partition, "partition", 0, "partition (without -keys)")
	fs.StringVar(&p.acks, "acks", "all", "0, 1 or all")
	fs.BoolVar(&p.idempotent, "idempotent", false, "idempotent producer (needs acks=all)")
	fs.IntVar(&p.rate, "rate", 0, "records per second; 0 unlimited")
	fs.StringVar(&p.history, "history", "history.jsonl", "history file")
	fs.StringVar(&p.proc, "proc", "", "process name in the history")
	fs.DurationVar(&p.timeout, "timeout", 30*time.Second, "delivery timeout per record")
	fs.DurationVar(&p.hold, "hold", 0, "keep the connection open this long after the last send (acks=0)")
	fs.BoolVar(&p.allowErrs, "allow-errors", false, "failed or unknown sends do not fail the command (faults expected); the history still has them")
	fs.StringVar(&p.codec, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.StringVar(&p.user, "user", "", "SASL user NAME or NAME:PASSWORD (default: the superuser on SASL clusters)")
	fs.IntVar(&p.headers, "headers", 0, "add N headers h0..h(N-1) to each record")
	fs.StringVar(&p.clientID, "client-id", "", "client.id (quotas); also prints throttled=N, the responses the broker throttled")
	scaled := fs.Bool("scaled", false, "multiply -n by the suite scale (load scenarios)")
	pos := parse(ts, fs, args, 1, produceUsage)
	p.topic = s.topic(ts, pos[0])
	if *scaled {
		p.n = s.scaled(p.n)
	}
	if p.proc == "" {
		p.proc = s.procName("p")
	}
	p.history = s.path(p.history)
	c := s.needCluster(ts)
	opts := s.clientOpts(c, p.user)
	s.runJob(ts, neg, bg, func() (string, error) { return p.run(s, opts) })
}

func (p *produceSpec) clientOpts(base []kgo.Opt) ([]kgo.Opt, error) {
	opts := append(base, kgo.DefaultProduceTopic(p.topic), kgo.RecordDeliveryTimeout(p.timeout),
		kgo.ProducerLinger(time.Millisecond))
	switch p.acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	default:
		return nil, fmt.Errorf("produce: bad -acks %q", p.acks)
	}
	if !p.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	} else if p.acks != "all" && p.acks != "-1" {
		return nil, errors.New("produce: -idempotent needs -acks all")
	}
	if p.keys == 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	codec, ok := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}[p.codec]
	if !ok {
		return nil, fmt.Errorf("produce: bad -compression %q", p.codec)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	return opts, nil
}

// run sends the records and returns a summary line.
func (p *produceSpec) run(s *state, base []kgo.Opt) (string, error) {
	opts, err := p.clientOpts(base)
	if err != nil {
		return "", err
	}
	throttle := &throttleHook{}
	if p.clientID != "" {
		opts = append(opts, kgo.ClientID(p.clientID), kgo.WithHooks(throttle))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	rec, err := checker.Create(p.history, p.proc, s.clock)
	if err != nil {
		return "", err
	}
	var (
		mu                     sync.Mutex
		acked, failed, unknown int
		firstErr               error
		wg                     sync.WaitGroup
	)
	start := time.Now()
	for i := 0; i < p.n; i++ {
		if p.rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(p.rate))))
		}
		r := p.record(i)
		op := rec.Invoke(checker.Op{F: checker.Send, Topic: p.topic, Partition: r.Partition, Offset: -1, Value: string(r.Value)})
		wg.Add(1)
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			defer wg.Done()
			typ := p.outcome(err)
			op.Partition = r.Partition
			if typ == checker.OK && p.acks != "0" {
				op.Offset = r.Offset
			} else if typ == checker.OK {
				typ = checker.Info // acks=0: nobody knows
			}
			if err != nil {
				op.Error = err.Error()
			}
			rec.Complete(op, typ)
			mu.Lock()
			defer mu.Unlock()
			switch typ {
			case checker.OK:
				acked++
			case checker.Fail:
				failed++
			default: // acks=0, or an error that leaves the outcome open
				unknown++
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	time.Sleep(p.hold)
	cerr := rec.Close()
	out := fmt.Sprintf("produced %d: acked=%d failed=%d unknown=%d\n", p.n, acked, failed, unknown)
	if p.clientID != "" {
		out += fmt.Sprintf("throttled=%d\n", throttle.n.Load())
	}
	if firstErr != nil && !p.allowErrs {
		return out, fmt.Errorf("%s%d of %d sends did not succeed; first error: %w", out, failed+unknownErrs(unknown, p.acks), p.n, firstErr)
	}
	return out, cerr
}

func unknownErrs(unknown int, acks string) int {
	if acks == "0" {
		return 0
	}
	return unknown
}

func (p *produceSpec) record(i int) *kgo.Record {
	v := fmt.Sprintf("%s-%d", p.proc, i)
	if len(v) < p.size {
		v += strings.Repeat("x", p.size-len(v))
	}
	r := &kgo.Record{Topic: p.topic, Value: []byte(v), Partition: int32(p.partition)}
	if p.keys > 0 {
		r.Key = []byte(fmt.Sprintf("k%d", i%p.keys))
	}
	for h := range p.headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%d", h), Value: []byte(fmt.Sprintf("%s-h%d", v, h))})
	}
	return r
}

// definite errors are those after which the broker did not append the
// record; anything else (timeouts, lost connections) is unknown.
var definite = []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.CorruptMessage,
	kerr.InvalidRecord, kerr.NotEnoughReplicas, kerr.InvalidTopicException,
	kerr.TopicAuthorizationFailed, kerr.UnknownTopicOrPartition, kerr.InvalidRequiredAcks,
	kerr.OutOfOrderSequenceNumber, kerr.InvalidProducerEpoch, kerr.UnsupportedForMessageFormat,
	kerr.PolicyViolation, kerr.InvalidTimestamp}

func (p *produceSpec) outcome(err error) string {
	if err == nil {
		return checker.OK
	}
	for _, d := range definite {
		if errors.Is(err, d) {
			return checker.Fail
		}
	}
	return checker.Info
}
