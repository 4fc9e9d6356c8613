package replica

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// logLeader is a FetchClient answering from a leader's core/log as the
// broker is meant to: DivergingEpoch from EndOffsetForEpoch, records up
// to the log end offset, the log end as high watermark.
type logLeader struct {
	l     *log.Log
	epoch int32
}

func (ll *logLeader) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp := kmsg.NewPtrFetchResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			ll.fetchPartition(ctx, req, p, &rp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (ll *logLeader) fetchPartition(ctx context.Context, req *kmsg.FetchRequest, p kmsg.FetchRequestTopicPartition, rp *kmsg.FetchResponseTopicPartition) {
	start, leo := ll.l.StartOffset(), ll.l.EndOffset()
	rp.HighWatermark, rp.LogStartOffset = leo, start
	switch {
	case p.CurrentLeaderEpoch < ll.epoch:
		rp.ErrorCode = kerr.FencedLeaderEpoch.Code
		return
	case p.CurrentLeaderEpoch > ll.epoch:
		rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		return
	}
	if p.LastFetchedEpoch >= 0 {
		e, end := ll.l.EndOffsetForEpoch(p.LastFetchedEpoch)
		if e != p.LastFetchedEpoch || end < p.FetchOffset {
			rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = e, end
			return
		}
	}
	if p.FetchOffset < start || p.FetchOffset > leo {
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		return
	}
	if p.FetchOffset == leo {
		select { // long poll
		case <-ll.l.Changed():
		case <-ctx.Done():
		case <-time.After(time.Duration(req.MaxWaitMillis) * time.Millisecond):
		}
		return
	}
	s, err := ll.l.Read(p.FetchOffset, int(p.PartitionMaxBytes), leo)
	if err != nil {
		rp.ErrorCode = kerr.UnknownServerError.Code
		return
	}
	defer s.Close()
	rp.RecordBatches, err = s.Bytes(nil)
	if err != nil {
		rp.ErrorCode = kerr.UnknownServerError.Code
	}
}

func (ll *logLeader) OffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch, rp.EndOffset = ll.l.EndOffsetForEpoch(p.LeaderEpoch)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (ll *logLeader) ListOffsets(_ context.Context, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Offset = p.Partition, ll.l.EndOffset()
			if p.Timestamp == -2 {
				rp.Offset = ll.l.StartOffset()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (ll *logLeader) Close() {}

// logFollower is a FollowerPartition over a core/log, as the broker's
// partition implements it.
type logFollower struct {
	l        *log.Log
	curEpoch int32
	mu       sync.Mutex
	hw       int64
}

func (f *logFollower) TopicPartition() (string, int32) { return "t", 0 }

func (f *logFollower) FetchState() (int64, int32, int32) {
	e, ok := f.l.LatestEpoch()
	if !ok {
		e = -1
	}
	return f.l.EndOffset(), e, f.curEpoch
}

func (f *logFollower) EndOffsetForEpoch(e int32) (int32, int64) { return f.l.EndOffsetForEpoch(e) }

func (f *logFollower) AppendFetched(b []byte, hw, start int64) error {
	if len(b) > 0 {
		if _, err := f.l.AppendReplica(b); err != nil {
			return err
		}
	}
	if leo := f.l.EndOffset(); start > f.l.StartOffset() && start <= leo {
		if _, err := f.l.DeleteRecordsBefore(start); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.hw = max(f.hw, min(hw, f.l.EndOffset()))
	f.mu.Unlock()
	return nil
}

func (f *logFollower) TruncateTo(o int64) error              { return f.l.Truncate(o) }
func (f *logFollower) TruncateFullyAndStartAt(o int64) error { return f.l.TruncateFullyAndStartAt(o) }

func openTestLog(t *testing.T) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.Logger = quietLogger()
	l, err := log.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// write appends n batches as leader in epoch; tag makes the values differ
// between replicas.
func write(t *testing.T, l *log.Log, epoch int32, n int, tag string) {
	t.Helper()
	for i := range n {
		b := recordtest.Batch(record.CodecNone, recordtest.Rec{Value: fmt.Appendf(nil, "%s-%d-%d-%0200d", tag, epoch, i, 0), Timestamp: 1})
		if _, err := l.Append(b, log.AppendOptions{LeaderEpoch: epoch}); err != nil {
			t.Fatal(err)
		}
	}
}

// copyLog appends everything in src to dst as a replica would.
func copyLog(t *testing.T, dst, src *log.Log) {
	t.Helper()
	if _, err := dst.AppendReplica(logBytes(t, src)); err != nil {
		t.Fatal(err)
	}
}

func logBytes(t *testing.T, l *log.Log) []byte {
	t.Helper()
	start, end := l.StartOffset(), l.EndOffset()
	if start == end {
		return nil
	}
	s, err := l.Read(start, 1<<30, end)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFetcherReplicatesLog runs the fetcher between two core/logs and
// checks that the follower ends byte-identical to the leader, in the
// KIP-101 situations.
func TestFetcherReplicatesLog(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, leader, follower *log.Log)
	}{
		{"an empty follower copies the leader's epochs", func(t *testing.T, leader, follower *log.Log) {
			write(t, leader, 1, 10, "L")
			write(t, leader, 3, 10, "L")
		}},
		{"a follower whose tail was written by a deposed leader truncates to the divergence point", func(t *testing.T, leader, follower *log.Log) {
			write(t, leader, 1, 10, "L")
			copyLog(t, follower, leader)
			write(t, follower, 2, 5, "F") // follower led epoch 2; nothing replicated
			write(t, leader, 3, 10, "L")
		}},
		{"a follower with a longer tail of a shared epoch is cut at the leader's end of it", func(t *testing.T, leader, follower *log.Log) {
			write(t, leader, 1, 10, "L")
			copyLog(t, follower, leader)
			write(t, follower, 1, 5, "F")
			write(t, leader, 3, 4, "L")
		}},
		{"a follower with several divergent epochs walks back epoch by epoch", func(t *testing.T, leader, follower *log.Log) {
			write(t, leader, 1, 5, "L")
			copyLog(t, follower, leader)
			write(t, follower, 2, 3, "F")
			write(t, follower, 4, 3, "F")
			write(t, leader, 3, 6, "L")
			write(t, leader, 5, 2, "L")
		}},
		{"a follower behind the leader's log start restarts there", func(t *testing.T, leader, follower *log.Log) {
			write(t, leader, 1, 3, "L")
			copyLog(t, follower, leader)
			write(t, leader, 2, 30, "L")
			if _, err := leader.DeleteRecordsBefore(20); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			leader, follower := openTestLog(t), openTestLog(t)
			c.setup(t, leader, follower)
			le, _ := leader.LatestEpoch()
			ll := &logLeader{l: leader, epoch: le}
			lf := &logFollower{l: follower, curEpoch: le}
			fs := NewFetchers(Config{ReplicaID: 2, MaxWait: 20 * time.Millisecond, Backoff: time.Millisecond, Logger: quietLogger(),
				Dial: func(BrokerAddr) (FetchClient, error) { return ll, nil }})
			t.Cleanup(func() { fs.Close() })
			fs.Follow(lf, BrokerAddr{ID: 1, Addr: "leader"})
			caughtUp := func() bool {
				return follower.EndOffset() == leader.EndOffset() && follower.StartOffset() == leader.StartOffset()
			}
			waitFor(t, "the follower to catch up", caughtUp)
			// New data keeps flowing.
			write(t, leader, le, 3, "L2")
			waitFor(t, "the follower to catch up again", caughtUp)
			fs.Unfollow(lf)
			if !bytes.Equal(logBytes(t, follower), logBytes(t, leader)) {
				t.Fatal("follower log differs from the leader's")
			}
			for e := int32(0); e <= le+1; e++ {
				fe, fo := follower.EndOffsetForEpoch(e)
				ge, go_ := leader.EndOffsetForEpoch(e)
				if fe != ge || fo != go_ {
					t.Fatalf("EndOffsetForEpoch(%d): follower (%d, %d), leader (%d, %d)", e, fe, fo, ge, go_)
				}
			}
			lf.mu.Lock()
			hw := lf.hw
			lf.mu.Unlock()
			if hw != leader.EndOffset() {
				t.Fatalf("follower high watermark %d, want %d", hw, leader.EndOffset())
			}
		})
	}
}
