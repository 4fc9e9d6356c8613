package conformance

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const sendUsage = "send TOPIC PART [-key K|-null-key] [-value V|-null-value] [-size B] [-header k=v]... [-timestamp MS] [-acks 0|1|all] [-user U] [-expect ok|ERR]"

// send TOPIC PART ...: produces one record exactly as described (keys,
// null keys and values, headers, a CreateTime timestamp) with a plain
// (non-idempotent, uncompressed) producer and prints "offset=N
// partition=P" and "send: ok", or "send: ERROR_NAME". -expect says
// which outcome the scenario needs. It sets $OFFSET.
func cmdSend(ts *testscript.TestScript, neg bool, args []string) {
	s := st(ts)
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	key := fs.String("key", "", "record key")
	nullKey := fs.Bool("null-key", false, "no key (null)")
	value := fs.String("value", "v", "record value")
	nullValue := fs.Bool("null-value", false, "null value (a tombstone)")
	size := fs.Int("size", 0, "pad the value to this many bytes")
	ms := fs.Int64("timestamp", -1, "CreateTime in ms since the epoch (-1: now)")
	acks := fs.String("acks", "all", "0, 1 or all")
	user := fs.String("user", "", "SASL user")
	expect := fs.String("expect", "ok", "ok or Kafka error names separated by |")
	hdrs := kvList{}
	fs.Var(&hdrs, "header", "header key=value (repeatable, order kept)")
	pos := parse(ts, fs, args, 2, sendUsage)
	topic, part := s.topic(ts, pos[0]), atoi32(ts, pos[1])
	r := &kgo.Record{Topic: topic, Partition: part}
	if !*nullKey && *key != "" {
		r.Key = []byte(*key)
	}
	if !*nullValue {
		v := *value
		if len(v) < *size {
			v += strings.Repeat("x", *size-len(v))
		}
		r.Value = []byte(v)
	}
	for _, h := range hdrs {
		k, v, _ := strings.Cut(h, "=")
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if *ms >= 0 {
		r.Timestamp = time.UnixMilli(*ms)
	}
	opts := append(s.clientOpts(s.needCluster(ts), *user), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(3), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(16<<20), kgo.MaxBufferedBytes(64<<20))
	switch *acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	cl, err := kgo.NewClient(opts...)
	ts.Check(err)
	defer cl.Close()
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	got, err := cl.ProduceSync(ctx, r).First()
	if err == nil {
		fmt.Fprintf(ts.Stdout(), "offset=%d partition=%d\n", got.Offset, got.Partition)
		ts.Setenv("OFFSET", strconv.FormatInt(got.Offset, 10))
	}
	expectErr(ts, "send", err, *expect)
}

// sleep D: pauses the script for duration D (a wait for time itself,
// e.g. to let segment.ms or delete.retention.ms pass).
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("sleep: %v", err)
	}
	time.Sleep(d)
}

// kvList collects repeated flag values in order.
type kvList []string

func (l *kvList) String() string     { return strings.Join(*l, ",") }
func (l *kvList) Set(v string) error { *l = append(*l, v); return nil }

const dumpUsage = "dump TOPIC PART [-from OFFSET] [-isolation committed] [-fields offset,key,value,headers,tstype,timestamp] [-max-value N] [-user U]"

// dump TOPIC PART ...: reads the partition from -from (default: the log
// start) to its high watermark (last stable offset under read_committed)
// with one fresh consumer and prints one line per record:
//
//	offset=3 key=k1 value=v3 headers=[h0=a] tstype=create timestamp=1700000000000
//
// A null key or value prints as <null>; values longer than -max-value
// bytes print as <N bytes>. Then "records=N". Scenarios compare it
// with stdout/cmp; it does not feed the checker.
func cmdDump(ts *testscript.TestScript, neg bool, args []string) {
	s := st(ts)
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	from := fs.Int64("from", -2, "first offset (-2: the log start)")
	isolation := fs.String("isolation", "uncommitted", "committed or uncommitted")
	fields := fs.String("fields", "offset,key,value,headers", "fields to print, in order")
	maxValue := fs.Int("max-value", 64, "print longer values as <N bytes>")
	user := fs.String("user", "", "SASL user")
	pos := parse(ts, fs, args, 2, dumpUsage)
	topic, part := s.topic(ts, pos[0]), atoi32(ts, pos[1])
	iso := int8(0)
	if *isolation == "committed" {
		iso = 1
	}
	start, end, err := offsetsOf(s.client(ts), topic, part, iso)
	ts.Check(err)
	if *from >= 0 {
		start = *from
	}
	recs, err := readPartition(s, ts, topic, part, iso, start, end, *user)
	if err != nil {
		finish(ts, neg, fmt.Errorf("dump %s/%d: %w", pos[0], part, err))
		return
	}
	if neg {
		ts.Fatalf("dump: unexpected success")
	}
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(formatRecord(r, strings.Split(*fields, ","), *maxValue))
	}
	n := len(recs)
	fmt.Fprintf(ts.Stdout(), "%srecords=%d\n", b.String(), n)
}

// readPartition reads topic/part from start up to end with a fresh
// consumer and returns the records (not the control records).
func readPartition(s *state, ts *testscript.TestScript, topic string, part int32, iso int8, start, end int64, user string) ([]*kgo.Record, error) {
	if start >= end {
		return nil, nil
	}
	opts := append(s.clientOpts(s.needCluster(ts), user),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(start)}}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.KeepControlRecords())
	if iso == 1 {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	next := start
	for next < end {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reached offset %d of %d within 30s", next, end)
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !kerr.IsRetriable(err) { // retriable: a partition between leaders
				ferr = err
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
		})
	}
	return recs, nil
}

func formatRecord(r *kgo.Record, fields []string, maxValue int) string {
	bytesOf := func(b []byte) string {
		switch {
		case b == nil:
			return "<null>"
		case len(b) > maxValue:
			return fmt.Sprintf("<%d bytes>", len(b))
		}
		return string(b)
	}
	var parts []string
	for _, f := range fields {
		switch f {
		case "offset":
			parts = append(parts, fmt.Sprintf("offset=%d", r.Offset))
		case "key":
			parts = append(parts, "key="+bytesOf(r.Key))
		case "value":
			parts = append(parts, "value="+bytesOf(r.Value))
		case "headers":
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+bytesOf(h.Value))
			}
			parts = append(parts, "headers=["+strings.Join(hs, ",")+"]")
		case "tstype":
			parts = append(parts, "tstype="+map[int8]string{0: "create", 1: "log-append"}[r.Attrs.TimestampType()])
		case "timestamp":
			parts = append(parts, fmt.Sprintf("timestamp=%d", r.Timestamp.UnixMilli()))
		}
	}
	return strings.Join(parts, " ") + "\n"
}

const listOffsetsUsage = "list-offsets TOPIC PART earliest|latest|max-timestamp|MS [-isolation committed] [-expect ok|ERR]"

// list-offsets TOPIC PART SPEC: one ListOffsets to the leader. SPEC is
// earliest (-2), latest (-1), max-timestamp (-3, KIP-734) or a
// timestamp in ms (the first offset whose timestamp is at least it).
// Prints "offset=N timestamp=T" and sets $OFFSET.
func cmdListOffsets(ts *testscript.TestScript, neg bool, args []string) {
	s := st(ts)
	fs := flag.NewFlagSet("list-offsets", flag.ContinueOnError)
	isolation := fs.String("isolation", "uncommitted", "committed or uncommitted")
	expect := fs.String("expect", "ok", "ok or Kafka error names separated by |")
	pos := parse(ts, fs, args, 3, listOffsetsUsage)
	topic, part := s.topic(ts, pos[0]), atoi32(ts, pos[1])
	spec := map[string]int64{"earliest": -2, "latest": -1, "max-timestamp": -3}
	at, ok := spec[pos[2]]
	if !ok {
		v, err := strconv.ParseInt(pos[2], 10, 64)
		if err != nil {
			ts.Fatalf("usage: %s", listOffsetsUsage)
		}
		at = v
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if *isolation == "committed" {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, at, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := leaderRequest(ts, s.client(ts), topic, part, req)
	ts.Check(err)
	lr := resp.(*kmsg.ListOffsetsResponse)
	if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 {
		ts.Fatalf("list-offsets: malformed response")
	}
	p := lr.Topics[0].Partitions[0]
	got := "ok"
	if p.ErrorCode != 0 {
		got = errName(p.ErrorCode)
	} else {
		fmt.Fprintf(ts.Stdout(), "offset=%d timestamp=%d\n", p.Offset, p.Timestamp)
		ts.Setenv("OFFSET", strconv.FormatInt(p.Offset, 10))
	}
	fmt.Fprintf(ts.Stdout(), "list-offsets: %s\n", got)
	if !outcomeIn(got, *expect) {
		ts.Fatalf("list-offsets: got %s, want %s", got, *expect)
	}
}

func outcomeIn(got, expect string) bool {
	for _, e := range strings.Split(expect, "|") {
		if e == got {
			return true
		}
	}
	return false
}

// committed GROUP TOPIC PART: prints "committed=N" (-1: no commit), the
// group's committed offset from OffsetFetch.
func cmdCommitted(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: committed GROUP TOPIC PART")
	}
	s := st(ts)
	group, topic, part := s.group(args[0]), s.topic(ts, args[1]), atoi32(ts, args[2])
	ctx, cancel := ctxFor(15 * time.Second)
	defer cancel()
	offs, err := s.adm(ts).FetchOffsets(ctx, group)
	for err != nil && coordinatorError(kerrCode(err)) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond) // a fresh cluster's coordinator: retry, as clients do
		offs, err = s.adm(ts).FetchOffsets(ctx, group)
	}
	if err != nil && !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		ts.Fatalf("committed: %v", err)
	}
	at := int64(-1)
	if o, ok := offs.Lookup(topic, part); ok && o.Err == nil {
		at = o.At
	}
	fmt.Fprintf(ts.Stdout(), "committed=%d\n", at)
}
