package conformance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// producerID is the raw idempotent producer of a script.
type producerID struct {
	id    int64
	epoch int16
}

// raw produce|fetch|frame ...: hand-built requests, for what a well-behaved
// client never sends.
func cmdRaw(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("raw: state the expected outcome with -expect instead of !")
	}
	if len(args) == 0 {
		ts.Fatalf("usage: raw produce|fetch|frame ...")
	}
	switch args[0] {
	case "produce":
		rawProduce(ts, args[1:])
	case "fetch":
		rawFetch(ts, args[1:])
	case "frame":
		rawFrame(ts, args[1:])
	default:
		ts.Fatalf("raw: unknown request %q", args[0])
	}
}

const rawProduceUsage = "raw produce TOPIC PART [-batch valid|bad-crc|corrupt-gzip] [-records N] [-size BYTES] [-seq N] [-new-producer] [-repeat N] [-expect ok|ERROR_NAME[|...]]"

// rawProduce sends one hand-built batch (repeat times, unchanged) with
// acks=all and prints offset=N or error=NAME per response. When an error
// is expected, the partition's high watermark must not move.
func rawProduce(ts *testscript.TestScript, args []string) {
	fs := flag.NewFlagSet("raw produce", flag.ContinueOnError)
	kind := fs.String("batch", "valid", "valid, bad-crc or corrupt-gzip")
	nrec := fs.Int("records", 1, "records in the batch")
	size := fs.Int("size", 10, "bytes per value")
	seq := fs.Int("seq", -1, "base sequence; >= 0 makes the batch idempotent")
	newPID := fs.Bool("new-producer", false, "get a new producer ID first")
	repeat := fs.Int("repeat", 1, "send the same batch this many times")
	expect := fs.String("expect", "ok", "ok or Kafka error names separated by |")
	pos := parse(ts, fs, args, 2, rawProduceUsage)
	s := st(ts)
	topic, part := s.topic(ts, pos[0]), atoi32(ts, pos[1])
	cl := s.client(ts)
	o := recordtest.Options{Codec: record.CodecNone}
	if *seq >= 0 {
		if s.pid == nil || *newPID {
			s.pid = initProducerID(ts, cl)
		}
		o.Producer = &recordtest.Producer{ID: s.pid.id, Epoch: s.pid.epoch, BaseSequence: int32(*seq)}
	}
	batch := buildBatch(ts, o, *kind, *nrec, *size)
	_, hwBefore, err := offsetsOf(cl, topic, part, 0)
	ts.Check(err)
	for range *repeat {
		got := sendProduce(ts, cl, topic, part, batch)
		fmt.Fprintln(ts.Stdout(), got)
		if !outcomeMatches(got, *expect) {
			ts.Fatalf("raw produce: got %s, want %s", got, *expect)
		}
	}
	if *expect != "ok" {
		_, hwAfter, err := offsetsOf(cl, topic, part, 0)
		ts.Check(err)
		if hwAfter != hwBefore {
			ts.Fatalf("raw produce: rejected batch moved the high watermark %d -> %d", hwBefore, hwAfter)
		}
	}
}

func outcomeMatches(got, expect string) bool {
	for _, e := range strings.Split(expect, "|") {
		if (e == "ok" && strings.HasPrefix(got, "offset=")) || got == "error="+e {
			return true
		}
	}
	return false
}

func buildBatch(ts *testscript.TestScript, o recordtest.Options, kind string, n, size int) []byte {
	var recs []recordtest.Rec
	now := time.Now().UnixMilli()
	for i := range n {
		v := fmt.Sprintf("raw-%d-", i)
		v += strings.Repeat("x", max(size-len(v), 0))
		recs = append(recs, recordtest.Rec{Value: []byte(v), Timestamp: now})
	}
	switch kind {
	case "valid":
		return recordtest.Build(o, recs...)
	case "bad-crc":
		b := recordtest.Build(o, recs...)
		b[len(b)-1] ^= 0xff // a record byte changes; the CRC no longer matches
		return b
	case "corrupt-gzip":
		o.Codec = record.CodecGzip
		b := recordtest.Build(o, recs...)
		for i := 61 + 10; i < len(b)-8; i++ { // past the gzip header, keep the trailer's length
			b[i] ^= 0x5a
		}
		return recordtest.Reseal(b) // a valid CRC over garbage compressed data
	}
	ts.Fatalf("raw produce: unknown -batch %q", kind)
	return nil
}

func initProducerID(ts *testscript.TestScript, cl *kgo.Client) *producerID {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	ts.Check(err)
	if resp.ErrorCode != 0 {
		ts.Fatalf("InitProducerId: %s", errName(resp.ErrorCode))
	}
	return &producerID{resp.ProducerID, resp.ProducerEpoch}
}

// sendProduce sends batch to the partition's leader with acks=all.
func sendProduce(ts *testscript.TestScript, cl *kgo.Client, topic string, part int32, batch []byte) string {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(ts, cl, topic) // kgo picks the version: name or ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := leaderRequest(ts, cl, topic, part, req)
	ts.Check(err)
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		ts.Fatalf("raw produce: malformed response")
	}
	p := pr.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return "error=" + errName(p.ErrorCode)
	}
	return fmt.Sprintf("offset=%d", p.BaseOffset)
}

func leaderRequest(ts *testscript.TestScript, cl *kgo.Client, topic string, part int32, req kmsg.Request) (kmsg.Response, error) {
	leader, _, err := partitionState(cl, topic, part)
	ts.Check(err)
	ctx, cancel := ctxFor(15 * time.Second)
	defer cancel()
	return cl.Broker(int(leader)).Request(ctx, req)
}

// rawFetch: raw fetch TOPIC PART OFFSET [-leader-epoch N] prints error=NAME records=N
// high-watermark=H for one Fetch at OFFSET.
func rawFetch(ts *testscript.TestScript, args []string) {
	fs := flag.NewFlagSet("raw fetch", flag.ContinueOnError)
	epoch := fs.Int("leader-epoch", -1, "CurrentLeaderEpoch to send (-1: none)")
	maxBytes := fs.Int("max-bytes", 1<<20, "the request's MaxBytes and PartitionMaxBytes")
	args = parse(ts, fs, args, 3, "raw fetch TOPIC PART OFFSET [-leader-epoch N] [-max-bytes B]")
	s := st(ts)
	topic, part := s.topic(ts, args[0]), atoi32(ts, args[1])
	var off int64
	_, err := fmt.Sscan(args[2], &off)
	ts.Check(err)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 100, int32(*maxBytes)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(ts, s.client(ts), topic)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = part, off, int32(*maxBytes), int32(*epoch), -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := leaderRequest(ts, s.client(ts), topic, part, req)
	ts.Check(err)
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		ts.Fatalf("raw fetch: error %s or malformed response", errName(fr.ErrorCode))
	}
	p := fr.Topics[0].Partitions[0]
	n, maxOff := countRecords(p.RecordBatches)
	fmt.Fprintf(ts.Stdout(), "error=%s records=%d high-watermark=%d\n", errName(p.ErrorCode), n, p.HighWatermark)
	if maxOff >= p.HighWatermark && p.HighWatermark >= 0 && n > 0 {
		ts.Fatalf("raw fetch: returned offset %d at or past the high watermark %d", maxOff, p.HighWatermark)
	}
}

// countRecords counts the records in whole batches and returns the last
// offset covered.
func countRecords(b []byte) (int, int64) {
	n, last := 0, int64(-1)
	for len(b) >= 61 {
		size := int(binary.BigEndian.Uint32(b[8:])) + 12
		if size > len(b) {
			break
		}
		var rb kmsg.RecordBatch
		if rb.ReadFrom(b[:size]) == nil {
			n += int(rb.NumRecords)
			last = rb.FirstOffset + int64(rb.LastOffsetDelta)
		}
		b = b[size:]
	}
	return n, last
}

// frames are malformed requests, by name.
var frames = map[string]func() []byte{
	"oversized":       func() []byte { return frame(0x7fffffff, header(3, 12, 1)) },
	"negative-length": func() []byte { return frame(-1, header(3, 12, 1)) },
	"unknown-api":     func() []byte { return sized(header(32000, 0, 1)) },
	"unsupported-version": func() []byte {
		return sized(header(3, 999, 1))
	},
	"apiversions-future": func() []byte { return sized(append(header(18, 127, 1), 0)) }, // flexible header: empty tags
	"garbage":            func() []byte { return sized(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 16)) },
	"truncated":          func() []byte { return frame(100, header(3, 12, 1)) }, // says 100 bytes, sends 10, then half-closes
}

func header(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return binary.BigEndian.AppendUint16(b, 0xffff) // null client ID
}

func frame(size int32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(size)), body...)
}

func sized(body []byte) []byte { return frame(int32(len(body)), body) }

// rawFrame: raw frame KIND sends a malformed request on a fresh
// connection and prints "closed" or "response error=NAME". A connection
// that neither answers nor closes within 10s fails the command.
func rawFrame(ts *testscript.TestScript, args []string) {
	names := make([]string, 0, len(frames))
	for k := range frames {
		names = append(names, k)
	}
	if len(args) != 1 || frames[args[0]] == nil {
		ts.Fatalf("usage: raw frame KIND (one of %v)", names)
	}
	c := st(ts).needCluster(ts)
	conn, err := net.DialTimeout("tcp", c.Bootstrap()[0], 5*time.Second)
	ts.Check(err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(frames[args[0]]()); err != nil {
		fmt.Fprintln(ts.Stdout(), "closed")
		return
	}
	if args[0] == "truncated" {
		conn.(*net.TCPConn).CloseWrite()
	}
	out, err := readResponse(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		ts.Fatalf("raw frame %s: the broker neither answered nor closed within 10s", args[0])
	}
	fmt.Fprintln(ts.Stdout(), out)
}

// readResponse reads one response; for an ApiVersions-shaped answer it
// reports the error code. Any read error (EOF, reset) means closed.
func readResponse(conn net.Conn) (string, error) {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return "", err
		}
		return "closed", nil
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<20 {
		return fmt.Sprintf("response bytes=%d", n), nil
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return "closed", nil
	}
	if len(body) >= 6 {
		return "response error=" + errName(int16(binary.BigEndian.Uint16(body[4:]))), nil
	}
	return fmt.Sprintf("response bytes=%d", n), nil
}

// topicID returns the topic's ID from metadata (zero if the broker has none).
func topicID(ts *testscript.TestScript, cl *kgo.Client, topic string) [16]byte {
	m, err := metadata(cl, []string{topic})
	ts.Check(err)
	for _, t := range m.Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t.TopicID
		}
	}
	return [16]byte{}
}
