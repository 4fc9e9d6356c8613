package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/conformance/checker"
)

const consumeUsage = "consume TOPIC [-from start|end] [-until end|n=N] [-group G] [-commit none|before|after] [-crash-after N] [-isolation committed|uncommitted] [-history FILE] [-proc NAME] [-timeout D] [-user U] [&name&]"

type consumeSpec struct {
	topic      string
	from       string
	until      string
	untilN     int
	group      string
	commit     string
	crashAfter int
	committed  bool
	history    string
	proc       string
	timeout    time.Duration
	partitions int32
	user       string
}

// consume TOPIC ...: reads records and records every poll in the history.
// -until end (the default) reads up to the high watermarks (last stable
// offsets under read_committed) taken when it starts: the final read of
// a scenario. In a group, -commit says whether offsets are committed
// before processing (at-most-once) or after (at-least-once), and
// -crash-after N stops dead after processing N records.
func cmdConsume(ts *testscript.TestScript, neg bool, args []string) {
	args, bg := background(args)
	s := st(ts)
	var c consumeSpec
	var iso string
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.StringVar(&c.from, "from", "start", "start or end (where a consumer without a committed offset begins)")
	fs.StringVar(&c.until, "until", "end", "end (the high watermarks at start) or n=N records")
	fs.StringVar(&c.group, "group", "", "consumer group")
	fs.StringVar(&c.commit, "commit", "after", "none, before (at-most-once) or after (at-least-once) processing")
	fs.IntVar(&c.crashAfter, "crash-after", 0, "stop dead after N records")
	fs.StringVar(&iso, "isolation", "uncommitted", "committed or uncommitted")
	fs.StringVar(&c.history, "history", "history.jsonl", "history file")
	fs.StringVar(&c.proc, "proc", "", "process name in the history")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "give up after")
	fs.StringVar(&c.user, "user", "", "SASL user NAME or NAME:PASSWORD (default: the superuser on SASL clusters)")
	pos := parse(ts, fs, args, 1, consumeUsage)
	if c.group != "" {
		c.group = s.group(c.group)
	}
	c.topic, c.history, c.committed = s.topic(ts, pos[0]), s.path(c.history), iso == "committed"
	if n, ok := strings.CutPrefix(c.until, "n="); ok {
		v, err := strconv.Atoi(n)
		if err != nil {
			ts.Fatalf("consume: bad -until %q", c.until)
		}
		c.untilN = v
	} else if c.until != "end" {
		ts.Fatalf("consume: bad -until %q", c.until)
	}
	if c.proc == "" {
		c.proc = s.procName("c")
	}
	cl := s.client(ts)
	opts := s.clientOpts(s.needCluster(ts), c.user)
	s.runJob(ts, neg, bg, func() (string, error) { return c.run(s, cl, opts) })
}

// targets returns each partition's end (high watermark or last stable
// offset) and start.
func (c *consumeSpec) targets(admin kmsgRequester) (map[int32][2]int64, error) {
	m, err := metadata(admin, []string{c.topic})
	if err != nil {
		return nil, err
	}
	if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("consume: topic %s not found", c.topic)
	}
	iso := int8(0)
	if c.committed {
		iso = 1
	}
	out := map[int32][2]int64{}
	for _, p := range m.Topics[0].Partitions {
		start, end, err := offsetsOf(admin, c.topic, p.Partition, iso)
		if err != nil {
			return nil, err
		}
		out[p.Partition] = [2]int64{start, end}
	}
	return out, nil
}

func (c *consumeSpec) clientOpts(base []kgo.Opt, rec *checker.Recorder) []kgo.Opt {
	reset := kgo.NewOffset().AtStart()
	if c.from == "end" {
		reset = kgo.NewOffset().AtEnd()
	}
	// Control records (transaction markers) come back too, so a read
	// can reach an end offset that is a marker; they are not recorded.
	opts := append(base, kgo.ConsumeTopics(c.topic), kgo.ConsumeResetOffset(reset),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.KeepControlRecords())
	if c.committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if c.group != "" {
		assign := func(context.Context, *kgo.Client, map[string][]int32) {
			op := rec.Invoke(checker.Op{F: checker.Assign, Topic: c.topic, Offset: -1})
			rec.Complete(op, checker.OK)
		}
		opts = append(opts, kgo.ConsumerGroup(c.group), kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(assign), kgo.OnPartitionsRevoked(assign), kgo.OnPartitionsLost(assign),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	}
	return opts
}

func (c *consumeSpec) run(s *state, admin kmsgRequester, base []kgo.Opt) (string, error) {
	var ends map[int32][2]int64
	if c.untilN == 0 {
		var err error
		if ends, err = c.targets(admin); err != nil {
			return "", err
		}
	}
	rec, err := checker.Create(c.history, c.proc, s.clock)
	if err != nil {
		return "", err
	}
	out, err := c.consume(rec, admin, base, ends)
	return out, errors.Join(err, rec.Close())
}

func (c *consumeSpec) consume(rec *checker.Recorder, admin kmsgRequester, base []kgo.Opt, ends map[int32][2]int64) (string, error) {
	cl, err := kgo.NewClient(c.clientOpts(base, rec)...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	next := map[int32]int64{} // next offset to read per partition
	if c.group != "" && c.untilN == 0 {
		// A group member starts at the committed offsets, not the log start.
		if next, err = committedOffsets(ctx, admin, c.group, c.topic); err != nil {
			return "", err
		}
	}
	n := 0
	done := func() bool {
		if c.untilN > 0 {
			return n >= c.untilN
		}
		for p, se := range ends {
			if se[1] > se[0] && next[p] < se[1] {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return "", fmt.Errorf("consume %s: timed out after %d records; reached %v, want %v", c.topic, n, next, ends)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if kerr.IsRetriable(err) {
				return // a partition between leaders: the client retries
			}
			ferr = errors.Join(ferr, fmt.Errorf("%s/%d: %w", t, p, err))
		})
		if ferr != nil && !errors.Is(ferr, context.DeadlineExceeded) {
			return "", fmt.Errorf("consume: %w", ferr)
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if c.group != "" && c.commit == "before" {
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				return "", fmt.Errorf("consume: commit: %w", err)
			}
		}
		op := rec.Invoke(checker.Op{F: checker.Poll, Topic: c.topic, Offset: -1, Isolation: iso(c.committed)})
		crashed := false
		for _, r := range recs {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Attrs.IsControl() {
				continue
			}
			op.Reads = append(op.Reads, checker.Read{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			n++
			if c.crashAfter > 0 && n >= c.crashAfter {
				crashed = true
				break
			}
		}
		rec.Complete(op, checker.OK)
		if crashed {
			return fmt.Sprintf("consumed %d records, then crashed\n", n), nil
		}
		if c.group != "" && c.commit == "after" {
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				return "", fmt.Errorf("consume: commit: %w", err)
			}
		}
	}
	return fmt.Sprintf("consumed %d records\n", n), nil
}

func iso(committed bool) string {
	if committed {
		return checker.ReadCommitted
	}
	return ""
}

// committedOffsets returns group's committed offsets in topic.
func committedOffsets(ctx context.Context, admin kmsgRequester, group, topic string) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	m, err := metadata(admin, []string{topic})
	if err != nil {
		return nil, err
	}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, p.Partition)
		}
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, coord(admin))
	if err != nil {
		return nil, fmt.Errorf("consume: offset fetch: %w", err)
	}
	switch resp.ErrorCode {
	case 0:
	case kerr.GroupIDNotFound.Code: // a group with no commits yet
		return map[int32]int64{}, nil
	default:
		return nil, fmt.Errorf("consume: offset fetch: %s", errName(resp.ErrorCode))
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("consume: offset fetch %s/%d: %s", topic, p.Partition, errName(p.ErrorCode))
			}
			out[p.Partition] = max(p.Offset, 0)
		}
	}
	return out, nil
}
