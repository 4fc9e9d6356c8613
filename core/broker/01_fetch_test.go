package broker

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// fetchTarget is one partition of a raw fetch request.
type fetchTarget struct {
	topic     string
	id        [16]byte
	partition int32
	offset    int64
	maxBytes  int32
}

// newFetch builds a fetch request. A target named by a topic b knows gets
// that topic's ID too, so the request works at any version.
func newFetch(b *Broker, maxWaitMs, minBytes, maxBytes int32, targets ...fetchTarget) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, minBytes, maxBytes
	req.SessionEpoch = -1
	for _, tg := range targets {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = tg.topic, tg.id
		if t := b.topic(tg.topic); t != nil && tg.id == [16]byte{} {
			rt.TopicID = t.id
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tg.partition, tg.offset, tg.maxBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// fetchParts returns the response's partitions in order.
func fetchParts(t *testing.T, resp *kmsg.FetchResponse) []kmsg.FetchResponseTopicPartition {
	t.Helper()
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var ps []kmsg.FetchResponseTopicPartition
	for _, st := range resp.Topics {
		ps = append(ps, st.Partitions...)
	}
	return ps
}

// batchesOf splits fetched bytes into whole batches.
func batchesOf(t *testing.T, raw []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(raw) > 0 {
		_, b, rest, err := record.Next(raw)
		if err != nil {
			t.Fatalf("fetched bytes: %v", err)
		}
		if err := record.CheckCRC(b); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		out, raw = append(out, b), rest
	}
	return out
}

// values decodes the record values of uncompressed batches.
func values(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	for _, b := range batchesOf(t, raw) {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		recs := rb.Records
		for range rb.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(r.Value))
			recs = recs[len(r.AppendTo(nil)):]
		}
	}
	return out
}

// fetchBatches fetches one partition from offset without waiting and
// returns the batches.
func fetchBatches(t *testing.T, b *Broker, cl *kgo.Client, topic string, partition int32, offset int64) [][]byte {
	t.Helper()
	resp := request[*kmsg.FetchResponse](t, cl, newFetch(b, 0, 0, 1<<20, fetchTarget{topic: topic, partition: partition, offset: offset, maxBytes: 1 << 20}))
	sp := fetchParts(t, resp)[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		t.Fatalf("fetch %s-%d@%d: %v", topic, partition, offset, err)
	}
	return batchesOf(t, sp.RecordBatches)
}

// codeOf is the code of a Kafka error, 0 for none.
func codeOf(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}

func valueBatch(vals ...string) []byte {
	var recs []recordtest.Rec
	for _, v := range vals {
		recs = append(recs, recordtest.Rec{Value: []byte(v), Timestamp: 1})
	}
	return recordtest.Batch(record.CodecNone, recs...)
}

func TestFetchLongPoll(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "lp", 3, nil)

	for _, c := range []struct {
		name    string
		targets []fetchTarget
		produce int32
	}{
		{"one partition", []fetchTarget{{topic: "lp", partition: 0, maxBytes: 1 << 20}}, 0},
		{"several partitions", []fetchTarget{
			{topic: "lp", partition: 1, maxBytes: 1 << 20},
			{topic: "lp", partition: 2, maxBytes: 1 << 20},
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			fetcher := testClient(t, b) // its own connection, so the produce is not queued behind the fetch
			done := make(chan *kmsg.FetchResponse, 1)
			go func() {
				resp, err := fetcher.SeedBrokers()[0].Request(testCtx(t), newFetch(b, 20_000, 1, 1<<20, c.targets...))
				if err != nil {
					t.Errorf("fetch: %v", err)
				}
				r, _ := resp.(*kmsg.FetchResponse)
				done <- r
			}()
			time.Sleep(100 * time.Millisecond) // let the fetch start waiting (not an assertion)
			produceRaw(t, cl, "lp", map[int32][]byte{c.produce: valueBatch("woke")})
			resp := <-done
			if resp == nil {
				t.FailNow()
			}
			var got []string
			for _, sp := range fetchParts(t, resp) {
				if sp.ErrorCode != 0 {
					t.Fatalf("partition %d: %v", sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
				}
				got = append(got, values(t, sp.RecordBatches)...)
			}
			if len(got) != 1 || got[0] != "woke" {
				t.Fatalf("long poll returned %q, want the produced record", got)
			}
		})
	}
}

func TestFetchMaxWaitExpires(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "mw", 1, nil)
	tg := fetchTarget{topic: "mw", maxBytes: 1 << 20}

	sp := fetchParts(t, request[*kmsg.FetchResponse](t, cl, newFetch(b, 50, 1, 1<<20, tg)))[0]
	if sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 || sp.HighWatermark != 0 {
		t.Fatalf("empty partition: %v, %d bytes, hw %d; want no error, nothing, hw 0",
			kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches), sp.HighWatermark)
	}
	// Less than MinBytes is available: returned when MaxWait expires.
	produceOne(t, cl, "mw", valueBatch("few"))
	sp = fetchParts(t, request[*kmsg.FetchResponse](t, cl, newFetch(b, 50, 1<<20, 1<<20, tg)))[0]
	if got := values(t, sp.RecordBatches); len(got) != 1 || got[0] != "few" || sp.HighWatermark != 1 {
		t.Fatalf("after MaxWait: %q hw %d, want [few] hw 1", got, sp.HighWatermark)
	}
}

func TestFetchOffsets(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "off", 1, nil)
	produceOne(t, cl, "off", valueBatch("a", "b"))

	for _, c := range []struct {
		offset int64
		want   *kerr.Error
		vals   int
	}{
		{0, nil, 2},
		{1, nil, 2}, // the whole batch holding offset 1; the client skips offset 0
		{2, nil, 0}, // the high watermark: valid and empty
		{3, kerr.OffsetOutOfRange, 0},
		{-1, kerr.OffsetOutOfRange, 0},
	} {
		sp := fetchParts(t, request[*kmsg.FetchResponse](t, cl, newFetch(b, 0, 0, 1<<20, fetchTarget{topic: "off", offset: c.offset, maxBytes: 1 << 20})))[0]
		if sp.ErrorCode != codeOf(c.want) {
			t.Errorf("offset %d: %v, want %v", c.offset, kerr.ErrorForCode(sp.ErrorCode), c.want)
			continue
		}
		if n := len(values(t, sp.RecordBatches)); n != c.vals {
			t.Errorf("offset %d: %d records, want %d", c.offset, n, c.vals)
		}
		if c.want == nil && (sp.HighWatermark != 2 || sp.LastStableOffset != 2 || sp.LogStartOffset != 0) {
			t.Errorf("offset %d: hw %d lso %d start %d, want 2 2 0", c.offset, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset)
		}
	}
}

func TestFetchTopicIDsAndNames(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "ids", 1, nil)
	produceOne(t, cl, "ids", valueBatch("x"))
	details, err := kadm.NewClient(cl).ListTopics(testCtx(t), "ids")
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(details["ids"].ID)
	if id == [16]byte{} {
		t.Fatal("metadata gave no topic ID")
	}

	// v13+: by ID (the client negotiates our maximum, v16).
	resp := request[*kmsg.FetchResponse](t, cl, newFetch(b, 0, 0, 1<<20,
		fetchTarget{id: id, maxBytes: 1 << 20}, fetchTarget{id: [16]byte{1}, maxBytes: 1 << 20}))
	if resp.Version < 13 {
		t.Fatalf("fetch v%d, want v13+", resp.Version)
	}
	ps := fetchParts(t, resp)
	if resp.Topics[0].TopicID != id || ps[0].ErrorCode != 0 || fmt.Sprint(values(t, ps[0].RecordBatches)) != "[x]" {
		t.Fatalf("fetch by ID: topic %x, %v, %q", resp.Topics[0].TopicID, kerr.ErrorForCode(ps[0].ErrorCode), values(t, ps[0].RecordBatches))
	}
	if ps[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic ID: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(ps[1].ErrorCode))
	}

	// v12: by name.
	v := kversion.Stable()
	v.SetMaxKeyVersion(1, 12)
	old := testClient(t, b, kgo.MaxVersions(v))
	resp = request[*kmsg.FetchResponse](t, old, newFetch(b, 0, 0, 1<<20,
		fetchTarget{topic: "ids", maxBytes: 1 << 20}, fetchTarget{topic: "nope", maxBytes: 1 << 20}))
	if resp.Version != 12 {
		t.Fatalf("fetch v%d, want v12", resp.Version)
	}
	ps = fetchParts(t, resp)
	if ps[0].ErrorCode != 0 || fmt.Sprint(values(t, ps[0].RecordBatches)) != "[x]" {
		t.Fatalf("fetch by name: %v, %q", kerr.ErrorForCode(ps[0].ErrorCode), values(t, ps[0].RecordBatches))
	}
	if ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(ps[1].ErrorCode))
	}
}

func TestFetchMaxBytes(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "mb", 2, nil)
	payload := string(bytes.Repeat([]byte("x"), 1000))
	var batchLen int
	for i := range 3 {
		for p := int32(0); p < 2; p++ {
			batch := valueBatch(fmt.Sprintf("%d-%d-%s", p, i, payload))
			batchLen = len(batch)
			produceRaw(t, cl, "mb", map[int32][]byte{p: batch})
		}
	}
	count := func(maxBytes int32, partMax ...int32) []int {
		var tgs []fetchTarget
		for p, m := range partMax {
			tgs = append(tgs, fetchTarget{topic: "mb", partition: int32(p), maxBytes: m})
		}
		var n []int
		for _, sp := range fetchParts(t, request[*kmsg.FetchResponse](t, cl, newFetch(b, 0, 0, maxBytes, tgs...))) {
			if sp.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
			}
			n = append(n, len(batchesOf(t, sp.RecordBatches)))
		}
		return n
	}
	for _, c := range []struct {
		name     string
		maxBytes int32
		partMax  []int32
		want     string
	}{
		{"partition limit below one batch: first batch whole (KIP-74)", 1 << 20, []int32{10}, "[1]"},
		{"partition limit of two batches", 1 << 20, []int32{int32(2*batchLen + 10)}, "[2]"},
		{"everything", 1 << 20, []int32{1 << 20, 1 << 20}, "[3 3]"},
		{"response limit below one batch: only the first partition's first batch", 10, []int32{1 << 20, 1 << 20}, "[1 0]"},
		{"response limit of 2.5 batches", int32(2*batchLen + batchLen/2), []int32{1 << 20, 1 << 20}, "[2 0]"},
		{"a later partition's oversized first batch is not sent", 1 << 20, []int32{1 << 20, 10}, "[3 0]"},
	} {
		if got := fmt.Sprint(count(c.maxBytes, c.partMax...)); got != c.want {
			t.Errorf("%s: batches per partition %s, want %s", c.name, got, c.want)
		}
	}
}

func TestFetchSessionsDeclined(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "sess", 1, nil)
	req := newFetch(b, 0, 0, 1<<20, fetchTarget{topic: "sess", maxBytes: 1 << 20})
	req.SessionID, req.SessionEpoch = 0, 0 // asks for a new session
	resp := request[*kmsg.FetchResponse](t, cl, req)
	if resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("new session: %v, session %d; want no error, session 0", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	req.SessionID, req.SessionEpoch = 77, 3 // continues a session we never made
	if resp := request[*kmsg.FetchResponse](t, cl, req); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
	req.SessionID, req.SessionEpoch = 0, 3
	if resp := request[*kmsg.FetchResponse](t, cl, req); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("epoch without session: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func TestFetchLeaderEpoch(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "ep", 1, nil)
	const epoch = 5
	b.topic("ep").partitions[0].leaderEpoch.Store(epoch) // as if leadership had moved five times
	for _, c := range []struct {
		epoch int32
		want  *kerr.Error
	}{{-1, nil}, {epoch, nil}, {epoch + 1, kerr.UnknownLeaderEpoch}, {epoch - 1, kerr.FencedLeaderEpoch}} {
		req := newFetch(b, 0, 0, 1<<20, fetchTarget{topic: "ep", maxBytes: 1 << 20})
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = c.epoch
		sp := fetchParts(t, request[*kmsg.FetchResponse](t, cl, req))[0]
		if sp.ErrorCode != codeOf(c.want) {
			t.Errorf("fetch: epoch %d (current %d): %v, want %v", c.epoch, epoch, kerr.ErrorForCode(sp.ErrorCode), c.want)
		}
		lreq := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "ep"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.CurrentLeaderEpoch, lp.Timestamp = c.epoch, -1
		lt.Partitions = append(lt.Partitions, lp)
		lreq.Topics = append(lreq.Topics, lt)
		lsp := request[*kmsg.ListOffsetsResponse](t, cl, lreq).Topics[0].Partitions[0]
		if lsp.ErrorCode != codeOf(c.want) {
			t.Errorf("list offsets: epoch %d (current %d): %v, want %v", c.epoch, epoch, kerr.ErrorForCode(lsp.ErrorCode), c.want)
		}
		if c.want == nil && lsp.LeaderEpoch != epoch {
			t.Errorf("list offsets: leader epoch %d, want %d", lsp.LeaderEpoch, epoch)
		}
	}
}

// TestFetchZeroCopy checks that fetched records go out with sendfile, and
// that the copy path (zero.copy.enable=false) sends the same bytes.
func TestFetchZeroCopy(t *testing.T) {
	var fetched [2][]string
	for i, zeroCopy := range []bool{true, false} {
		b := testBroker(t, func(c *config.Broker) { c.ZeroCopy = zeroCopy })
		cl := testClient(t, b)
		createTopic(t, cl, "zc", 1, nil)
		prod := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
		// 4 KiB values: reads below pinMinBytes are copied, not sent from
		// the file, so the fetch must be larger than that.
		pad := strings.Repeat("z", 4<<10)
		for j := range 20 {
			prod.Produce(testCtx(t), &kgo.Record{Topic: "zc", Value: fmt.Appendf(nil, "record %d %s", j, pad)}, nil)
		}
		if err := prod.Flush(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		before := b.Stats()
		for _, r := range consume(t, consumer(t, b, "zc"), 20) {
			fetched[i] = append(fetched[i], string(r.Value))
		}
		after := b.Stats()
		if zeroCopy && after.SendfileCalls <= before.SendfileCalls {
			t.Errorf("zero copy on: sendfile calls %d -> %d, want growth", before.SendfileCalls, after.SendfileCalls)
		}
		if !zeroCopy && (after.CopiedFileBytes <= before.CopiedFileBytes || after.SendfileCalls != before.SendfileCalls) {
			t.Errorf("zero copy off: copied %d -> %d bytes, sendfile calls %d -> %d; want copies only",
				before.CopiedFileBytes, after.CopiedFileBytes, before.SendfileCalls, after.SendfileCalls)
		}
	}
	if fmt.Sprint(fetched[0]) != fmt.Sprint(fetched[1]) {
		t.Fatalf("zero copy and copy paths differ:\n%q\n%q", fetched[0], fetched[1])
	}
}

// TestDataPlaneVersions runs every served version of Produce, Fetch and
// ListOffsets once, so each encoding (flexible or not, zero-copy frame
// included) is exercised.
func TestDataPlaneVersions(t *testing.T) {
	b := testBroker(t)
	cl := testClient(t, b)
	createTopic(t, cl, "vers", 1, nil)
	pinned := func(key, v int16) *kgo.Client {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(key, v)
		return testClient(t, b, kgo.MaxVersions(vs))
	}
	var want []string
	for v := int16(3); v <= 11; v++ {
		val := fmt.Sprintf("produced at v%d", v)
		want = append(want, val)
		req := produceRequest(-1, "vers", valueBatch(val))
		resp := request[*kmsg.ProduceResponse](t, pinned(0, v), req)
		sp := resp.Topics[0].Partitions[0]
		if resp.Version != v || sp.ErrorCode != 0 || sp.BaseOffset != int64(v-3) {
			t.Fatalf("produce v%d (sent v%d): %v at %d", v, resp.Version, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
	}
	zstd := recordtest.Batch(record.CodecZstd, recordtest.Rec{Value: []byte("z"), Timestamp: 1})
	resp := request[*kmsg.ProduceResponse](t, pinned(0, 6), produceRequest(-1, "vers", zstd))
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedCompressionType.Code {
		t.Fatalf("zstd at produce v6: %v, want UNSUPPORTED_COMPRESSION_TYPE", kerr.ErrorForCode(code))
	}
	for v := int16(4); v <= 16; v++ {
		resp := request[*kmsg.FetchResponse](t, pinned(1, v), newFetch(b, 0, 0, 1<<20, fetchTarget{topic: "vers", maxBytes: 1 << 20}))
		sp := fetchParts(t, resp)[0]
		if resp.Version != v || sp.ErrorCode != 0 || fmt.Sprint(values(t, sp.RecordBatches)) != fmt.Sprint(want) || sp.HighWatermark != 9 {
			t.Fatalf("fetch v%d (got v%d): %v hw %d %q", v, resp.Version, kerr.ErrorForCode(sp.ErrorCode), sp.HighWatermark, values(t, sp.RecordBatches))
		}
	}
	for v := int16(1); v <= 8; v++ {
		if got := listOffset(t, pinned(2, v), "vers", 0, -1).Offset; got != 9 {
			t.Fatalf("list offsets v%d: latest %d, want 9", v, got)
		}
	}
}

// TestFetchLongPollEnds checks that a waiting fetch ends when its
// connection closes and when the broker stops, rather than holding either
// until MaxWait (a minute here).
func TestFetchLongPollEnds(t *testing.T) {
	b := testBroker(t)
	createTopic(t, testClient(t, b), "end", 1, nil)
	req := newFetch(b, 60_000, 1, 1<<20, fetchTarget{topic: "end", maxBytes: 1 << 20})
	req.Version = 11

	gone := dialRaw(t, b)
	gone.send(req)
	waiting := dialRaw(t, b)
	waiting.send(req)
	time.Sleep(50 * time.Millisecond) // let both fetches start waiting (not an assertion)
	gone.conn.Close()

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker Close blocked by a waiting fetch")
	}
	// The fetch still open when the broker stopped was answered (empty)
	// or its connection closed; it did not wait out MaxWait.
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := waiting.recv(resp); err == nil {
		if sp := fetchParts(t, resp)[0]; sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 {
			t.Fatalf("fetch answered at stop: %v, %d bytes", kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches))
		}
	}
}
