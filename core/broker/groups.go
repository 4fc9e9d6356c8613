package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/group"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/wire"
	rangeassignor "github.com/vltava/vltava/plugins/assignor/range"
	"github.com/vltava/vltava/plugins/assignor/roundrobin"
	"github.com/vltava/vltava/plugins/sdk"
)

// offsetsTopic is the internal topic holding group metadata and offsets.
const offsetsTopic = "__consumer_offsets"

// groupHost runs the group coordinator (core/group) for the broker: it
// serializes calls into it, appends the records each step asks for to
// __consumer_offsets, and only then sends the step's replies. It loads a
// __consumer_offsets partition when this broker becomes its leader and
// unloads it when it stops leading (groups_load.go). Two goroutines owned
// by the broker run the coordinator's timers (run) and the loads
// (loader).
type groupHost struct {
	b *Broker

	// mu serializes the coordinator and the appends of its records, so
	// the log holds records in the order the state changed.
	mu sync.Mutex
	c  *group.Coordinator

	// loads are the partitions being loaded (groups_load.go), by
	// partition; guarded by mu, read by the loader goroutine outside it.
	loads map[int32]*group.Load

	createMu sync.Mutex    // serializes creating __consumer_offsets
	wakeCh   chan struct{} // wakes run: a deadline may have moved
	loadCh   chan struct{} // wakes loader: leadership may have changed
}

// waiter is the group.Waiter of one request: its reply arrives on ch.
type waiter struct{ ch chan kmsg.Response }

func newWaiter() *waiter { return &waiter{ch: make(chan kmsg.Response, 1)} }

// brokerTopics is the coordinator's view of the broker's topics.
type brokerTopics struct{ b *Broker }

func (t brokerTopics) Topic(name string) (group.TopicInfo, bool) {
	tp := t.b.topic(name)
	if tp == nil {
		return group.TopicInfo{}, false
	}
	return group.TopicInfo{Name: name, ID: tp.id, Partitions: int32(len(tp.partitions))}, true
}

func (t brokerTopics) TopicByID(id [16]byte) (group.TopicInfo, bool) {
	tp := t.b.topicByID(id)
	if tp == nil {
		return group.TopicInfo{}, false
	}
	return group.TopicInfo{Name: tp.name, ID: id, Partitions: int32(len(tp.partitions))}, true
}

func (t brokerTopics) Names() []string { return t.b.meta.Load().names() }

// builtinAssignors orders the built-in assignors by
// group.consumer.assignors; unknown names are skipped with a warning.
func (b *Broker) builtinAssignors() []sdk.Assignor {
	builtin := []sdk.Assignor{roundrobin.Uniform{}, rangeassignor.Assignor{}, roundrobin.Assignor{}}
	var out []sdk.Assignor
	for _, name := range strings.Split(b.cfg.GroupConsumerAssignors, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, a := range builtin {
			if a.Name() == name {
				out, found = append(out, a), true
			}
		}
		if !found && name != "" {
			b.logger.Warn("broker: group.consumer.assignors names an unknown assignor", "assignor", name)
		}
	}
	return out
}

// startGroups builds the coordinator, loads the __consumer_offsets
// partitions this broker already leads (all of them on a single broker),
// and starts the timer and loader goroutines.
func (b *Broker) startGroups() error {
	cfg := group.DefaultConfig()
	cfg.OffsetsPartitions = b.cfg.OffsetsTopicNumPartitions
	if t := b.topic(offsetsTopic); t != nil {
		cfg.OffsetsPartitions = int32(len(t.partitions))
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	cfg.InitialRebalanceDelay = ms(b.cfg.GroupInitialRebalanceDelayMs)
	cfg.MinSessionTimeout, cfg.MaxSessionTimeout = ms(b.cfg.GroupMinSessionTimeoutMs), ms(b.cfg.GroupMaxSessionTimeoutMs)
	cfg.ConsumerSessionTimeout = ms(b.cfg.GroupConsumerSessionTimeoutMs)
	cfg.ConsumerHeartbeatInterval = ms(b.cfg.GroupConsumerHeartbeatIntervalMs)
	cfg.OffsetsRetention = time.Duration(b.cfg.OffsetsRetentionMinutes) * time.Minute
	cfg.OffsetsRetentionCheck = ms(b.cfg.OffsetsRetentionCheckIntervalMs)
	cfg.MaxMetadataBytes = int(b.cfg.OffsetMetadataMaxBytes)
	cfg.Assignors = b.assignors
	if cfg.Assignors == nil {
		cfg.Assignors = b.builtinAssignors()
	}
	cfg.Topics = brokerTopics{b}
	cfg.Logger = b.logger
	h := &groupHost{b: b, c: group.New(cfg), wakeCh: make(chan struct{}, 1),
		loadCh: make(chan struct{}, 1), loads: map[int32]*group.Load{}}
	h.mu.Lock()
	deliver(h.syncLocked(time.Now()))
	h.mu.Unlock()
	if err := h.loadPending(); err != nil {
		return err
	}
	b.groups = h
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		h.run()
	}()
	go func() {
		defer b.wg.Done()
		h.loader()
	}()
	return nil
}

// run fires the coordinator's timers until the broker stops. Each step
// first brings ownership in line with leadership (step), so timers of
// groups whose partition moved away never fire.
func (h *groupHost) run() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		h.mu.Lock()
		next := h.c.NextDeadline()
		h.mu.Unlock()
		wait := time.Second
		if !next.IsZero() {
			wait = min(max(time.Until(next), time.Millisecond), time.Second)
		}
		t.Reset(wait)
		select {
		case <-h.b.stopCh:
			return
		case <-h.wakeCh:
		case <-t.C:
			h.step(func(c *group.Coordinator, now time.Time) group.Output { return c.Tick(now) })
		}
	}
}

// step runs one coordinator step, appends its records, makes them
// visible, and delivers its replies: durable ones only if the append
// succeeded. It returns the step's output with the replies final.
func (h *groupHost) step(fn func(c *group.Coordinator, now time.Time) group.Output) group.Output {
	h.mu.Lock()
	now := time.Now()
	unloaded := h.syncLocked(now)
	out := fn(h.c, now)
	appended, err := h.appendLocked(out.Records, now)
	if err == nil {
		h.c.Apply(now, out.Records)
	} else {
		h.b.logger.Error("broker: append to __consumer_offsets", "err", err)
	}
	h.mu.Unlock()
	deliver(unloaded)
	if err == nil && anyDurable(out.Replies) {
		// Like Kafka's acks=-1 for the offsets topic: a commit is
		// acknowledged only once every ISR member has it, so it survives
		// the coordinator's failover. Waiting happens outside h.mu.
		err = h.awaitReplicated(appended)
		if err != nil {
			h.b.logger.Warn("broker: __consumer_offsets write not replicated", "err", err)
		}
	}
	for i, r := range out.Replies {
		if err != nil && r.Durable {
			out.Replies[i].Resp = group.FailReply(r.Resp, group.StorageErrorCode())
		}
	}
	deliver(out.Replies)
	select { // the step may have moved a deadline
	case h.wakeCh <- struct{}{}:
	default:
	}
	return out
}

// offsetsCommitTimeout bounds the wait for the ISR on an offsets-topic
// write (Kafka's offsets.commit.timeout.ms default).
const offsetsCommitTimeout = 5 * time.Second

// deliver hands replies to the requests waiting for them.
func deliver(rs []group.Reply) {
	for _, r := range rs {
		if w, ok := r.To.(*waiter); ok {
			select {
			case w.ch <- r.Resp:
			default:
			}
		}
	}
}

func anyDurable(rs []group.Reply) bool {
	for _, r := range rs {
		if r.Durable {
			return true
		}
	}
	return false
}

// awaitReplicated waits until the high watermark of every written
// partition passes the write; on a single broker it returns at once.
func (h *groupHost) awaitReplicated(ws []ackWait) error {
	if len(ws) == 0 {
		return nil
	}
	timer := time.NewTimer(offsetsCommitTimeout)
	defer timer.Stop()
	expired := false
	for _, w := range ws {
		if err := h.b.awaitAck(context.Background(), w, timer.C, &expired); err != nil {
			return err
		}
	}
	return nil
}

// appendLocked writes records to their __consumer_offsets partitions, one
// batch per partition, and returns what each write must wait for to be
// replicated. h.mu must be held.
func (h *groupHost) appendLocked(recs []group.Record, now time.Time) ([]ackWait, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	t := h.b.topic(offsetsTopic)
	if t == nil {
		return nil, errors.New("broker: __consumer_offsets does not exist")
	}
	byPartition := map[int32][]group.Record{}
	var order []int32
	for _, r := range recs {
		if _, ok := byPartition[r.Partition]; !ok {
			order = append(order, r.Partition)
		}
		byPartition[r.Partition] = append(byPartition[r.Partition], r)
	}
	var waits []ackWait
	for _, i := range order {
		p := t.partition(i)
		if p == nil {
			return nil, fmt.Errorf("broker: __consumer_offsets has no partition %d", i)
		}
		// One batch per run of records with the same producer:
		// transactional offset commits go in their producer's
		// transactional batch (txn_offsets.go in core/group).
		for _, run := range producerRuns(byPartition[i]) {
			batch := recordBatch(run, now.UnixMilli())
			if run[0].Txn {
				batch = txnRecordBatch(run, now.UnixMilli())
			}
			// AppendAsLeader holds the partition's leader/ISR lock across
			// its leader check and the append (issue 9, fault 1).
			res, epoch, err := p.AppendAsLeader(batch, now, nil)
			if errors.Is(err, part.ErrNotLeader) {
				return nil, fmt.Errorf("broker: %s moved to another broker: %w", p, err)
			}
			if err != nil {
				return nil, err
			}
			waits = append(waits, ackWait{p: p, last: res.LastOffset, epoch: epoch, minISR: p.Config().MinInsyncReplicas})
		}
	}
	return waits, nil
}

// recordBatch encodes records as one uncompressed RecordBatch v2.
func recordBatch(recs []group.Record, ts int64) []byte {
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		body := kr.AppendTo(nil)[1:] // with Length 0, the length varint is one byte
		kr.Length = int32(len(body))
		raw = kr.AppendTo(raw)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: raw,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	record.SetCRC(out)
	return out
}

// ensureOffsetsTopic creates __consumer_offsets on first use, compacted,
// with offsets.topic.num.partitions partitions.
func (b *Broker) ensureOffsetsTopic(ctx context.Context) error {
	if b.topic(offsetsTopic) != nil {
		return nil
	}
	h := b.groups
	h.createMu.Lock()
	defer h.createMu.Unlock()
	if b.topic(offsetsTopic) != nil {
		return nil
	}
	n := b.cfg.OffsetsTopicNumPartitions
	rf := max(1, min(b.cfg.OffsetsTopicReplicationFactor, int16(len(b.liveBrokers()))))
	_, code, msg := b.createTopic(ctx, offsetsTopic, n, rf, map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}, false)
	if code != 0 && code != errTopicAlreadyExists {
		return fmt.Errorf("broker: create %s: %s (%s)", offsetsTopic, msg, kerr.ErrorForCode(code))
	}
	return nil
}

// coordinatorReady makes sure the group coordinator can serve: it creates
// __consumer_offsets if needed. It returns a Kafka error code (0 if ready).
func (b *Broker) coordinatorReady(ctx context.Context) int16 {
	if err := b.ensureOffsetsTopic(ctx); err != nil {
		b.logger.Warn("broker: group coordinator not available", "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// clientOf identifies the client a request came from.
func clientOf(req *wire.Request) group.Client {
	cl := group.Client{ID: req.ClientID}
	if req.Conn != nil && req.Conn.Remote != nil {
		host := req.Conn.Remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		cl.Host = "/" + host
	}
	return cl
}

// await waits for the reply to w, or for the connection (or broker) to
// close, which ends the request without a response.
func await(ctx context.Context, w *waiter) (*wire.Response, error) {
	select {
	case resp := <-w.ch:
		return reply(resp)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
