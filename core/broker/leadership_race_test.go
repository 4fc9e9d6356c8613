package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// logBatches reads every batch of a broker's replica of topic-0, keyed by
// base offset.
func logBatches(t *testing.T, b *Broker, topic string) map[int64][]byte {
	t.Helper()
	p := b.topic(topic).partition(0)
	out := map[int64][]byte{}
	off, end := p.log.StartOffset(), p.log.EndOffset()
	for off < end {
		s, err := p.log.Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("broker %d: read at %d: %v", b.cfg.NodeID, off, err)
		}
		buf, err := s.Bytes(nil)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			break
		}
		for len(buf) > 0 {
			h, batch, rest, err := record.Next(buf)
			if err != nil {
				t.Fatalf("broker %d: batch at %d: %v", b.cfg.NodeID, off, err)
			}
			buf = rest
			if h.LastOffset() < off {
				continue
			}
			out[h.BaseOffset] = slices.Clone(batch)
			off = h.LastOffset() + 1
		}
	}
	return out
}

// compareReplicas waits until every broker's replica of topic-0 has the
// same log end offset, then checks that they hold the same batches
// offset by offset.
func compareReplicas(t *testing.T, c *inProcCluster, topic string) {
	t.Helper()
	c.waitFor("every replica of "+topic+" has the same log end", func() bool {
		var ends []int64
		for _, b := range c.brokers() {
			ends = append(ends, b.topic(topic).partition(0).log.EndOffset())
		}
		return len(slices.Compact(ends)) == 1
	})
	var ref map[int64][]byte
	var refID int32
	for _, b := range c.brokers() {
		got := logBatches(t, b, topic)
		if ref == nil {
			ref, refID = got, b.cfg.NodeID
			continue
		}
		for off, batch := range ref {
			if !bytes.Equal(got[off], batch) {
				t.Errorf("offset %d: broker %d and broker %d hold different batches (%d and %d bytes)",
					off, refID, b.cfg.NodeID, len(batch), len(got[off]))
			}
		}
		if len(got) != len(ref) {
			t.Errorf("broker %d holds %d batches, broker %d %d", b.cfg.NodeID, len(got), refID, len(ref))
		}
	}
}

// moveLeaderOff makes broker 1 the leader of topic-0 (assigned {2,1,3},
// so 2 is preferred) by stopping broker 2 and starting it again.
func moveLeaderOff(t *testing.T, c *inProcCluster, topic string) {
	t.Helper()
	c.stop(2) // controlled shutdown: leadership moves to 1
	c.waitFor("broker 1 leads", func() bool { v := c.partitionMeta(1, topic, 0); return v != nil && v.Leader == 1 })
	c.start(2)
	c.waitFor("broker 2 is back in the ISR", func() bool {
		v := c.partitionMeta(1, topic, 0)
		return v.Leader == 1 && len(v.ISR) == 3
	})
}

// produceAt sends one record to broker with the client's acks setting.
func produceAt(ctx context.Context, cl *kgo.Client, broker int32, topic string, value string) (*kmsg.ProduceResponse, error) {
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordtest.Batch(record.CodecNone, recordtest.Rec{Value: []byte(value), Timestamp: time.Now().UnixMilli()})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(ctx, cl.Broker(int(broker)))
}

// TestAppendAfterLosingLeadership is issue 9's fault 1: a produce passes
// the leader check on broker 1, then leadership moves to broker 2 (a
// preferred-leader election) before the append. The append must either
// land under the epoch broker 1 led (so it is truncated away when broker 1
// follows) or be refused; never under the new epoch, where broker 1's
// fetch would find no divergence and keep bytes the leader does not have.
func TestAppendAfterLosingLeadership(t *testing.T) {
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	cl := c.client()
	const topic = "race"
	c.createAssigned(ctx, cl, topic, [][]int32{{2, 1, 3}})
	produceAcksAll(ctx, t, cl, topic, 5)
	moveLeaderOff(t, c, topic)
	old := c.broker(1).topic(topic).partition(0)
	oldEpoch := old.LeaderEpoch()
	// A new client (broker 2 restarted on a new port) whose raw produce
	// requests go out with acks=1 (kgo sets Acks from its config).
	cl = c.client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())

	entered, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	produceHook = func(p *partition) {
		if p == old {
			once.Do(func() { close(entered); <-release })
		}
	}
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(func() { let(); produceHook = nil }) // before the brokers close

	type result struct {
		resp *kmsg.ProduceResponse
		err  error
	}
	held := make(chan result, 1)
	go func() {
		r, err := produceAt(ctx, cl, 1, topic, "from the old leader")
		held <- result{r, err}
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the produce never reached the append")
	}

	adm := kadm.NewClient(c.client())
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[topic][0]; r.Err != nil {
		t.Fatalf("preferred election: %v %s", r.Err, r.ErrMessage)
	}
	c.waitFor("broker 2 leads at a newer epoch", func() bool {
		st := c.broker(2).topic(topic).partition(0).State()
		return st.Role == part.Leader && st.View.LeaderEpoch > oldEpoch
	})
	// The new leader takes a write at the offset the held append wants.
	c.waitFor("the new leader takes a write", func() bool {
		r, err := produceAt(ctx, cl, 2, topic, "from the new leader")
		return err == nil && r.Topics[0].Partitions[0].ErrorCode == 0
	})
	// Broker 1 may learn of the election while the append is held (it
	// did before the fix) or only after it (the leader/ISR lock holds the
	// transition back); give it the chance, then let the append go.
	deadline := time.Now().Add(2 * time.Second)
	for old.IsLeader() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	let()
	res := <-held
	if res.err != nil {
		t.Fatal(res.err)
	}
	sp := res.resp.Topics[0].Partitions[0]
	t.Logf("held produce: %v at offset %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	if sp.ErrorCode != 0 && sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("held produce: %v, want success under the old epoch or NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(sp.ErrorCode))
	}
	if e, _ := old.log.LatestEpoch(); sp.ErrorCode == 0 && e > oldEpoch && !old.IsLeader() {
		// Checked again below by content; this names the cause.
		t.Errorf("broker 1 appended under epoch %d, which it does not lead (it led %d)", e, oldEpoch)
	}
	produceAcksAll(ctx, t, c.client(kgo.RequiredAcks(kgo.AllISRAcks())), topic, 5)
	compareReplicas(t, c, topic)
}

// TestLeadershipChurnReplicasIdentical: three brokers, 1 MiB lz4 batches
// with acks=all while preferred-leader elections move the leadership
// every 200 ms; afterwards every replica holds the same bytes. A few
// seconds by default; VLTAVA_CHURN_SECONDS=60 runs longer.
func TestLeadershipChurnReplicasIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dur := 3 * time.Second
	if s, _ := strconv.Atoi(os.Getenv("VLTAVA_CHURN_SECONDS")); s > 0 {
		dur = time.Duration(s) * time.Second
	}
	c := startInProcCluster(t, 3)
	ctx := clusterCtx(t)
	const topic = "churn"
	c.createAssigned(ctx, c.client(), topic, [][]int32{{1, 2, 3}})
	adm := kadm.NewClient(c.client())

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	elections := 0
	go func() { // move the leadership: make a non-preferred replica lead, then elect the preferred one
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// Put the next broker first in the replica list (a reassignment
			// within the same replica set), then elect it as the preferred
			// leader.
			v := c.partitionMeta(1, topic, 0)
			if v == nil || v.Leader < 0 {
				continue
			}
			next := v.Leader%3 + 1
			order := []int32{next, next%3 + 1, (next+1)%3 + 1}
			req := kadm.AlterPartitionAssignmentsReq{}
			req.Assign(topic, 0, order)
			if _, err := adm.AlterPartitionAssignments(ctx, req); err != nil {
				continue
			}
			rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
			if err == nil && rs[topic][0].Err != nil {
				err = rs[topic][0].Err
			}
			if err == nil {
				elections++
			}
		}
	}()

	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerBatchMaxBytes(2<<20), kgo.MetadataMinAge(50*time.Millisecond))
	value := bytes.Repeat([]byte("vltava "), (1<<20)/7)
	end := time.Now().Add(dur)
	acked, errs := 0, 0
	var mu sync.Mutex
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		// Keep a few records in flight, so the loop ends on time
		// however slow the acknowledgements are.
		for cl.BufferedProduceRecords() >= 8 && time.Now().Before(end) {
			time.Sleep(5 * time.Millisecond)
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: append([]byte(fmt.Sprint(i)), value...)}, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				acked++
			} else if errs++; errs <= 3 {
				t.Logf("produce: %v", err)
			}
		})
	}
	close(stop) // then let the last writes settle
	wg.Wait()
	mu.Lock()
	t.Logf("%d records acknowledged while the leadership moved %d times", acked, elections)
	mu.Unlock()
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	if err := cl.Flush(fctx); err != nil {
		for _, b := range c.brokers() {
			p := b.topic(topic).partition(0)
			st := p.State()
			t.Logf("broker %d: %v epoch %d leader %d isr %v leo %d hw %d follow %q", b.cfg.NodeID, st.Role, st.View.LeaderEpoch, st.View.Leader, st.View.ISR, p.log.EndOffset(), p.HighWatermark(), p.followAddr)
		}
		t.Fatal(err)
	}
	t.Logf("%d records acknowledged, %d leadership moves", acked, elections)
	compareReplicas(t, c, topic)
}
