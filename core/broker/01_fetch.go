package broker

// Fetch v4-v16 reads record batches, sending them from the segment files
// with sendfile when the connection allows (zero copy, see wire.FetchFrame).
//
// Version notes: v4 adds IsolationLevel, LastStableOffset and aborted
// transactions; v5 LogStartOffset (KIP-107); v7 fetch sessions (KIP-227);
// v9 CurrentLeaderEpoch (KIP-320); v11 Rack and PreferredReadReplica
// (KIP-392); v12 is flexible, with LastFetchedEpoch; v13 names topics by ID
// (KIP-516); v15 moves ReplicaID into ReplicaState (KIP-903); v16 adds
// NodeEndpoints: partitions answered NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH carry CurrentLeader and the response the leader's
// endpoint (KIP-951, leaderhint.go).
//
// Per partition, in request order:
//
//   - unknown topic: UNKNOWN_TOPIC_OR_PARTITION (by name, < v13) or
//     UNKNOWN_TOPIC_ID (>= v13); unknown partition:
//     UNKNOWN_TOPIC_OR_PARTITION; a CurrentLeaderEpoch other than -1 or
//     ours: FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer);
//   - a fetch offset below the log start offset or above the log end
//     offset is OFFSET_OUT_OF_RANGE. Offsets from the high watermark to the
//     log end offset are valid and return nothing (as in Kafka; on one
//     broker the two differ only while an append is being acknowledged);
//   - records are whole batches below the high watermark, starting with
//     the batch that holds the fetch offset; HighWatermark,
//     LastStableOffset (the high watermark or, if lower, the first offset
//     of the oldest open transaction) and LogStartOffset are set;
//   - read_committed (IsolationLevel 1) reads only below the last stable
//     offset and lists the aborted transactions whose marker is at or
//     after the fetch offset and whose first batch is below the end of
//     the read, which the consumer uses to drop their records.
//
// Sizes (KIP-74): each partition returns at most PartitionMaxBytes and the
// response at most MaxBytes, except that the first batch of the first
// partition with data is always returned whole, so a consumer can not get
// stuck behind a batch larger than its limits. A later partition whose
// first batch does not fit in what is left returns nothing this time.
//
// Long poll: when fewer than MinBytes are available and no partition has
// an error, the request waits until MinBytes are available, MaxWaitMillis
// passes, the broker stops, or the connection closes. It wakes when the
// high watermark of any requested partition moves (partition.HWChanged);
// a follower's fetch wakes on appends and role changes instead
// (partition.ViewChanged). It runs in the connection's own goroutine and
// starts none.
//
// Not yet: fetch sessions (KIP-227) are declined by answering SessionID 0
// to a request that asks for one, which every client (franz-go, sarama,
// librdkafka) handles by sending full fetch requests; an incremental fetch
// of a session we never created gets FETCH_SESSION_ID_NOT_FOUND.
//
// Replication (cluster mode): only the leader serves fetches
// (NOT_LEADER_OR_FOLLOWER elsewhere). A fetch from a replica (ReplicaID,
// or ReplicaState.ID from v15, >= 0) reads up to the log end offset
// instead of the high watermark, reports the follower's position to the
// leader state (which may advance the high watermark), and wakes on
// appends as well as HW moves. When the follower's LastFetchedEpoch and
// FetchOffset are not on the leader's log, the answer is DivergingEpoch
// (KIP-320) with no records: the follower truncates and fetches again.

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	part "github.com/vltava/vltava/core/partition"
	"github.com/vltava/vltava/core/wire"
)

// fetchPart is one requested partition and its slot in the response.
type fetchPart struct {
	p        *partition // nil when code is set before reading
	offset   int64
	maxBytes int32
	sp       *kmsg.FetchResponseTopicPartition
	replica  bool // a follower's fetch: read up to the log end, not the HW
	// committed is IsolationLevel read_committed: read up to the last
	// stable offset and list the aborted transactions (issue 11).
	committed bool
}

// fetchRead is what one pass over the partitions read: a range per
// partition (zero if none) and the slices that back them.
type fetchRead struct {
	ranges []wire.FileRange
	slices []*log.Slice
	bytes  int64
	final  bool          // an error was found: answer now, do not wait
	parked time.Duration // time spent waiting for data (long poll)
}

func (fr *fetchRead) release() {
	for _, s := range fr.slices {
		s.Close()
	}
	fr.slices = fr.slices[:0]
	clear(fr.ranges)
	fr.bytes, fr.final = 0, false
}

func handleFetch(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.FetchRequest)
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	if code := checkFetchSession(r); code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	parts := b.fetchPlan(r, resp)
	if r.Version >= 16 {
		b.fetchLeaderHints(r, resp)
	}
	fr := &fetchRead{ranges: make([]wire.FileRange, len(parts))}
	if err := b.fetchWait(ctx, r, parts, fr); err != nil {
		fr.release()
		return nil, err
	}
	req.Parked += fr.parked
	for i := range parts {
		if n := fr.ranges[i].Len; n > 0 && parts[i].p != nil {
			parts[i].p.traffic.out(n, parts[i].replica)
		}
	}
	throttle := b.fetchThrottle(req, r, fr.ranges)
	resp.ThrottleMillis = millis(throttle)
	applyDenied(ctx, resp) // topics the principal may not read (authz.go)
	frame, err := wire.FetchFrame(resp, fr.ranges)
	if err != nil {
		fr.release()
		return nil, err
	}
	slices := fr.slices
	return &wire.Response{Frame: frame, Throttle: throttle, Done: func() {
		for _, s := range slices {
			s.Close()
		}
	}}, nil
}

// checkFetchSession declines fetch sessions: a request that opens one
// (ID 0, epoch 0) or needs none (epoch -1) is served in full and answered
// with SessionID 0, meaning "no session"; one that continues a session
// fails, since we never hand out session IDs.
func checkFetchSession(r *kmsg.FetchRequest) int16 {
	if r.Version < 7 || r.SessionEpoch == 0 || r.SessionEpoch == -1 {
		return 0
	}
	if r.SessionID != 0 {
		return kerr.FetchSessionIDNotFound.Code
	}
	return kerr.InvalidFetchSessionEpoch.Code
}

// fetchPlan resolves the requested partitions and lays out the response
// in request order. Partitions that can not be read get their error code
// now.
func (b *Broker) fetchPlan(r *kmsg.FetchRequest, resp *kmsg.FetchResponse) []fetchPart {
	snap := b.meta.Load()
	replicaID := fetchReplicaID(r)
	now := time.Now()
	n := 0
	for i := range r.Topics {
		n += len(r.Topics[i].Partitions)
	}
	parts := make([]fetchPart, 0, n)
	resp.Topics = make([]kmsg.FetchResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt, st := &r.Topics[i], &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *topic
		unknown := kerr.UnknownTopicOrPartition.Code
		if r.Version >= 13 {
			t, unknown = snap.byID[rt.TopicID], kerr.UnknownTopicID.Code
			if t != nil {
				st.Topic = t.name
			}
		} else {
			t = snap.byName[rt.Topic]
		}
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, sp := &rt.Partitions[j], &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			if r.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			fp := fetchPart{offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, sp: sp, committed: r.IsolationLevel == 1}
			switch {
			case t == nil:
				setFetchError(sp, unknown)
			case t.partition(rp.Partition) == nil:
				setFetchError(sp, kerr.UnknownTopicOrPartition.Code)
			default:
				fp.p = t.partition(rp.Partition)
				st := fp.p.State() // role and epoch from one snapshot
				if r.Version >= 9 {
					if code := checkLeaderEpoch(st.View.LeaderEpoch, rp.CurrentLeaderEpoch); code != 0 {
						setFetchError(sp, code)
						fp.p = nil
						break
					}
				}
				if st.Role != part.Leader {
					setFetchError(sp, kerr.NotLeaderForPartition.Code)
					fp.p = nil
					break
				}
				if replicaID >= 0 {
					fp.replica = true
					if b.replicaFetched(fp.p, replicaID, st.View.LeaderEpoch, r, rp, sp, now) {
						fp.p = nil
					}
				}
			}
			parts = append(parts, fp)
		}
	}
	return parts
}

// fetchLeaderHints adds KIP-951's CurrentLeader to partitions answered
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, and the leaders'
// endpoints to the response.
func (b *Broker) fetchLeaderHints(r *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	snap := b.meta.Load()
	var hints hintEndpoints
	for i := range resp.Topics {
		st := &resp.Topics[i]
		t := snap.byID[r.Topics[i].TopicID]
		if t == nil {
			continue
		}
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code && sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
				continue
			}
			if h, ok := b.leaderHintFor(t.partition(sp.Partition)); ok {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = h.id, h.epoch
				hints.add(h.endpoint)
			}
		}
	}
	if len(hints) > 0 {
		resp.Brokers = hints.fetchBrokers()
	}
}

// checkLeaderEpoch applies KIP-320's fencing: -1 skips the check, an
// older epoch is fenced, a newer one is not known here yet.
func checkLeaderEpoch(cur, epoch int32) int16 {
	switch {
	case epoch == -1 || epoch == cur:
		return 0
	case epoch < cur:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

func setFetchError(sp *kmsg.FetchResponseTopicPartition, code int16) {
	sp.ErrorCode = code
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
}

// fetchWait reads the partitions into fr, waiting as long poll requires.
// It returns an error only when ctx ends (the connection is closing).
func (b *Broker) fetchWait(ctx context.Context, r *kmsg.FetchRequest, parts []fetchPart, fr *fetchRead) error {
	var (
		chs   []<-chan struct{}
		timer *time.Timer
	)
	deadline := time.Now().Add(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	for {
		// Take the wake-up channels before reading, so an append between
		// the read and the wait is not missed.
		chs = chs[:0]
		for i := range parts {
			switch p := parts[i].p; {
			case p == nil:
			case parts[i].replica:
				// A follower reads up to the log end: appends and role
				// changes matter to it, high watermark moves do not.
				chs = append(chs, p.ViewChanged(), p.log.Changed())
			default:
				chs = append(chs, p.HWChanged())
			}
		}
		b.fetchRound(r, parts, fr)
		wait := time.Until(deadline)
		if fr.final || fr.bytes >= int64(r.MinBytes) || wait <= 0 || len(chs) == 0 {
			break
		}
		fr.release()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		parkedAt := time.Now()
		woke := waitAny(ctx, b.stopCh, timer.C, chs)
		fr.parked += time.Since(parkedAt)
		switch woke {
		case waitCanceled:
			return ctx.Err()
		case waitStopped:
			b.fetchRound(r, parts, fr) // answer with what there is
			return nil
		}
	}
	return nil
}

// pinMinBytes is the smallest read a fetch response sends from the file
// (sendfile, the file pinned until written); smaller ones are copied. The
// log's tail cache answers only smaller reads, from memory.
const pinMinBytes = log.SendfileMin

// fetchRound makes one pass over the partitions, filling the response
// fields and fr. It applies the size limits described in the file
// comment.
func (b *Broker) fetchRound(r *kmsg.FetchRequest, parts []fetchPart, fr *fetchRead) {
	remaining := int64(r.MaxBytes)
	for i := range parts {
		fp := &parts[i]
		if fp.p == nil {
			fr.final = true
			continue
		}
		limit := min(int64(fp.maxBytes), remaining)
		s, code := b.fetchPartition(fp, limit, fr.bytes == 0)
		if code != 0 {
			setFetchError(fp.sp, code)
			fr.final = true
			continue
		}
		if s == nil {
			continue
		}
		fr.bytes += s.Len()
		if s.File() == nil || s.Len() < pinMinBytes || log.FilesUnderPressure() {
			// A small read costs less copied than sent with its own
			// sendfile, and while descriptors are scarce a response must
			// not hold a file per partition until it is written. A read
			// the log answered from memory (its tail cache) is copied
			// already.
			buf, err := s.Bytes(nil)
			s.Close()
			if err != nil {
				setFetchError(fp.sp, kerr.KafkaStorageError.Code)
				fr.final = true
				continue
			}
			fr.ranges[i] = wire.FileRange{Data: buf, Len: int64(len(buf))}
		} else {
			fr.ranges[i] = wire.FileRange{File: s.File(), Pos: s.Pos(), Len: s.Len()}
			fr.slices = append(fr.slices, s)
		}
		remaining -= s.Len()
	}
}

// fetchPartition reads one partition from fp.offset up to limit bytes
// (whole batches; with first set, the first batch even if larger). It
// returns nil when there is nothing to send.
func (b *Broker) fetchPartition(fp *fetchPart, limit int64, first bool) (*log.Slice, int16) {
	p, sp := fp.p, fp.sp
	hw := p.HighWatermark()
	start, end := p.log.StartOffset(), p.log.EndOffset()
	sp.ErrorCode = 0
	lso := p.log.LastStableOffset(hw) // transactions (issue 11)
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, start
	if fp.offset < start || fp.offset > max(end, hw) {
		return nil, kerr.OffsetOutOfRange.Code
	}
	upTo := hw // consumers read committed records only
	switch {
	case fp.replica:
		upTo = end // followers copy everything the leader has
	case fp.committed:
		upTo = lso // read_committed: no open transaction's records
		setAbortedTxns(sp, p.log.AbortedTxns(fp.offset, upTo))
	}
	if fp.offset >= upTo || (!first && limit <= 0) {
		return nil, 0
	}
	s, err := p.log.Read(fp.offset, int(max(limit, 0)), upTo)
	switch {
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return nil, kerr.OffsetOutOfRange.Code
	case errors.Is(err, log.ErrClosed):
		return nil, kerr.UnknownTopicOrPartition.Code // deleted meanwhile
	case err != nil:
		b.logger.Error("broker: fetch", "partition", p.String(), "offset", fp.offset, "err", err)
		return nil, kerr.KafkaStorageError.Code
	}
	if s.Len() == 0 || (!first && s.Len() > limit) {
		s.Close()
		return nil, 0
	}
	return s, 0
}

// setAbortedTxns lists the aborted transactions a read_committed
// consumer must skip (issue 11).
func setAbortedTxns(sp *kmsg.FetchResponseTopicPartition, aborted []log.AbortedTxn) {
	sp.AbortedTransactions = sp.AbortedTransactions[:0]
	for _, a := range aborted {
		sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
}

// Outcomes of waitAny.
const (
	waitWoken = iota
	waitCanceled
	waitStopped
)

// waitAny blocks until one of chs is closed, timer fires (both
// waitWoken), stop is closed (waitStopped) or ctx ends (waitCanceled).
// One channel, the common case, needs no reflection.
func waitAny(ctx context.Context, stop <-chan struct{}, timer <-chan time.Time, chs []<-chan struct{}) int {
	if len(chs) == 1 {
		select {
		case <-chs[0]:
		case <-timer:
		case <-stop:
			return waitStopped
		case <-ctx.Done():
			return waitCanceled
		}
		return waitWoken
	}
	cases := make([]reflect.SelectCase, 0, len(chs)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)})
	for _, ch := range chs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	switch i, _, _ := reflect.Select(cases); i {
	case 0:
		return waitCanceled
	case 1:
		return waitStopped
	}
	return waitWoken
}

// fetchReplicaID is the ID of the replica that sent a fetch, or -1 for a
// consumer.
func fetchReplicaID(r *kmsg.FetchRequest) int32 {
	if r.Version >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}

// replicaFetched is the leader side of a follower's fetch at the leader
// epoch the request was checked against: a follower whose log diverged
// (LastFetchedEpoch, v12+) gets DivergingEpoch with where to truncate to;
// otherwise its position is recorded (which may advance the high
// watermark). It reports whether the partition is answered already (no
// records to read).
func (b *Broker) replicaFetched(p *partition, id, epoch int32, r *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, now time.Time) bool {
	last := rp.LastFetchedEpoch
	if r.Version < 12 {
		last = -1
	}
	div, err := p.ReplicaFetched(id, epoch, rp.FetchOffset, last, now)
	if err != nil { // leadership moved since the check
		setFetchError(sp, kerr.NotLeaderForPartition.Code)
		return true
	}
	if div == nil {
		return false
	}
	hw := p.HighWatermark()
	sp.ErrorCode = 0
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, hw, p.log.StartOffset()
	sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = div.Epoch, div.EndOffset
	b.logger.Info("broker: follower log diverged", "partition", p.String(), "fetch_offset", rp.FetchOffset,
		"last_fetched_epoch", rp.LastFetchedEpoch, "diverging_epoch", div.Epoch, "end_offset", div.EndOffset)
	return true
}
