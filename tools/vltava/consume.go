package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var consumeCommands = []command{
	{path: "consume", args: "TOPIC", summary: "print records (--from start|end|OFFSET|-N|@TIMESTAMP_MS; --group G commits as it goes)", run: consumeCmd},
}

// from is a parsed --from: the start, the end, an offset, N before the end,
// or the first offset at or after a Unix-millisecond timestamp.
type from struct {
	kind  byte  // 's' start, 'e' end, 'o' offset, 'r' relative to the end, 't' timestamp
	value int64 // the offset, the distance from the end, or the timestamp
}

func parseFrom(s string) (from, error) {
	switch {
	case s == "start" || s == "earliest" || s == "beginning":
		return from{kind: 's'}, nil
	case s == "end" || s == "latest":
		return from{kind: 'e'}, nil
	case strings.HasPrefix(s, "@"):
		ms, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || ms < 0 {
			return from{}, usagef("--from %q: want @ followed by Unix milliseconds", s)
		}
		return from{kind: 't', value: ms}, nil
	case strings.HasPrefix(s, "-"):
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || n < 0 {
			return from{}, usagef("--from %q: want -N, N records before the end", s)
		}
		return from{kind: 'r', value: n}, nil
	default:
		off, err := strconv.ParseInt(strings.TrimPrefix(s, "+"), 10, 64)
		if err != nil || off < 0 {
			return from{}, usagef("--from %q: want start, end, an offset, -N (N before the end) or @TIMESTAMP_MS", s)
		}
		return from{kind: 'o', value: off}, nil
	}
}

// resetPolicy is --reset: what to do with an offset outside the log, as
// Kafka's auto.offset.reset.
type resetPolicy string

const (
	resetEarliest resetPolicy = "earliest"
	resetLatest   resetPolicy = "latest"
	resetError    resetPolicy = "error"
)

func parseReset(s string) (resetPolicy, error) {
	switch p := resetPolicy(s); p {
	case resetEarliest, resetLatest, resetError:
		return p, nil
	case "none":
		return resetError, nil
	}
	return "", usagef("--reset %q: want earliest, latest or error", s)
}

// positions are the offsets consume starts at and the end offsets at start
// (for --until-end), per partition.
type positions struct {
	starts, ends map[int32]int64
	notes        []string // resets applied, to tell the user
}

// startPositions resolves f into an exact offset per partition (the
// timestamp through ListOffsets), applying reset to an offset outside
// [log start, log end]. partition < 0 means all partitions.
func startPositions(ctx context.Context, adm *kadm.Client, topic string, partition int32, f from, reset resetPolicy) (positions, error) {
	if err := topicExists(ctx, adm, topic); err != nil {
		return positions{}, err
	}
	endList, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = endList.Error()
	}
	if err != nil {
		return positions{}, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	startList, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = startList.Error()
	}
	if err != nil {
		return positions{}, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	var tsList kadm.ListedOffsets
	if f.kind == 't' {
		tsList, err = adm.ListOffsetsAfterMilli(ctx, f.value, topic)
		if err == nil {
			err = tsList.Error()
		}
		if err != nil {
			return positions{}, fmt.Errorf("list offsets by time: %w", err)
		}
	}
	pos := positions{starts: map[int32]int64{}, ends: map[int32]int64{}}
	var outside []string
	endList.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic || (partition >= 0 && o.Partition != partition) {
			return
		}
		end := o.Offset
		first, _ := startList.Lookup(topic, o.Partition)
		lo := first.Offset
		var at int64
		switch f.kind {
		case 's':
			at = lo
		case 'e':
			at = end
		case 'r':
			at = max(lo, end-f.value)
		case 't':
			t, ok := tsList.Lookup(topic, o.Partition)
			at = t.Offset
			if !ok || at < 0 {
				at = end
			}
		case 'o':
			at = f.value
			if at < lo || at > end {
				switch reset {
				case resetEarliest:
					pos.notes = append(pos.notes, fmt.Sprintf("%s/%d: offset %d is outside the log [%d, %d]; starting at the earliest, %d (--reset earliest)", topic, o.Partition, at, lo, end, lo))
					at = lo
				case resetLatest:
					pos.notes = append(pos.notes, fmt.Sprintf("%s/%d: offset %d is outside the log [%d, %d]; starting at the latest, %d (--reset latest)", topic, o.Partition, at, lo, end, end))
					at = end
				default:
					outside = append(outside, fmt.Sprintf("%s/%d holds offsets %d to %d", topic, o.Partition, lo, end))
				}
			}
		}
		pos.starts[o.Partition] = at
		pos.ends[o.Partition] = end
	})
	if len(outside) > 0 {
		slices.Sort(outside)
		return positions{}, fmt.Errorf("--from %d is outside the log: %s (end offsets are exclusive); "+
			"use --reset earliest or --reset latest to start there instead", f.value, strings.Join(outside, ", "))
	}
	if len(pos.starts) == 0 {
		return positions{}, fmt.Errorf("topic %s has no partition %d", topic, partition)
	}
	return pos, nil
}

func consumeCmd(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	fromFlag := f.String("from", "start", "where to start: start, end, an `OFFSET`, -N (N records before the end) or @TIMESTAMP_MS")
	resetFlag := f.String("reset", "error", "when --from OFFSET is outside a partition's log: earliest, latest or error (Kafka's auto.offset.reset)")
	n := f.Int("n", 0, "stop after `N` records (0: no limit; with --until-end, fewer if the end comes first)")
	partition := f.Int("partition", -1, "consume only this partition (-1: all)")
	format := f.String("format", defaultFormat, formatHelp)
	untilEnd := f.Bool("until-end", false, "stop at the end offsets seen at start (combines with -n: whichever comes first)")
	group := f.String("group", "", "consume as a member of consumer `GROUP`, committing the offsets of the records printed "+
		"(--from start|end applies when the group has no committed offset)")
	f.StringVar(group, "g", "", "same as --group")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	rf, err := parseFormat(*format)
	if err != nil {
		return usagef("%v", err)
	}
	start, err := parseFrom(*fromFlag)
	if err != nil {
		return err
	}
	reset, err := parseReset(*resetFlag)
	if err != nil {
		return err
	}
	if *n < 0 {
		return usagef("-n must not be negative")
	}
	topic := pos[0]
	if *group != "" {
		if start.kind != 's' && start.kind != 'e' {
			return usagef("--group takes --from start or end (where a group without committed offsets begins)")
		}
		if *untilEnd || *partition >= 0 {
			return usagef("--group does not combine with --until-end or --partition: the group assigns the partitions")
		}
		return consumeGroup(ctx, e, topic, *group, start, rf, *n)
	}
	var p positions
	err = e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		p, err = startPositions(ctx, adm, topic, int32(*partition), start, reset)
		return err
	})
	if err != nil {
		return err
	}
	for _, note := range p.notes {
		fmt.Fprintln(e.stderr, "vltava: note:", note)
	}
	offsets := make(map[int32]kgo.Offset, len(p.starts))
	for part, o := range p.starts {
		offsets[part] = kgo.NewOffset().At(o)
	}
	resetOffset := kgo.NewOffset().AtStart()
	if reset == resetLatest {
		resetOffset = kgo.NewOffset().AtEnd()
	}
	cl, err := e.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.ConsumeResetOffset(resetOffset))
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	c2 := consumer{cl: cl, topic: topic, format: rf, out: out, limit: *n}
	if *untilEnd {
		c2.remaining = map[int32]int64{}
		for part, end := range p.ends {
			if p.starts[part] < end {
				c2.remaining[part] = end
			}
		}
	}
	return c2.run(ctx)
}

// consumeGroup consumes topic as a member of group, committing the offset
// after each printed record (the marks are committed every few seconds and
// when it stops).
func consumeGroup(ctx context.Context, e *env, topic, group string, start from, rf recordFormat, limit int) error {
	resetOffset := kgo.NewOffset().AtStart()
	if start.kind == 'e' {
		resetOffset = kgo.NewOffset().AtEnd()
	}
	// The group coordinator must be reachable and the topic must exist
	// before joining, so that neither hangs.
	if err := e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		return topicExists(ctx, adm, topic)
	}); err != nil {
		return err
	}
	cl, err := e.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(resetOffset), kgo.AutoCommitMarks())
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	c := consumer{cl: cl, topic: topic, format: rf, out: out, limit: limit, mark: true}
	runErr := c.run(ctx)
	// Commit what was printed, with a bounded wait even after Ctrl-C.
	cctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil && runErr == nil {
		runErr = fmt.Errorf("commit offsets of group %s: %w", group, err)
	}
	cl.LeaveGroupContext(cctx)
	return runErr
}

// consumer prints records until its limit or the captured end offsets, or
// until the topic is deleted.
type consumer struct {
	cl     *kgo.Client
	topic  string
	format recordFormat
	out    *bufio.Writer
	limit  int // 0: none
	// remaining, when non-nil, maps each unfinished partition to the end
	// offset to stop at; consumption ends when it is empty.
	remaining map[int32]int64
	mark      bool // mark each printed record for commit (group mode)
	seen      int
}

func (c *consumer) done() bool {
	return (c.limit > 0 && c.seen >= c.limit) || (c.remaining != nil && len(c.remaining) == 0)
}

// errTopicDeleted ends a consume whose topic was deleted under it.
var errTopicDeleted = errors.New("topic deleted")

// topicCheckEvery is how often a running consume checks that its topic
// still exists.
var topicCheckEvery = time.Second

func (c *consumer) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // stopped by the cancel below, and waited for
		defer wg.Done()
		c.watchTopic(ctx, cancel)
	}()
	defer wg.Wait()
	defer cancel(nil)
	for !c.done() {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errTopicDeleted) {
				return cause
			}
			return nil // interrupted: a normal way to stop
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, kerr.UnknownTopicOrPartition) || errors.Is(fe.Err, kerr.UnknownTopicID) {
				return fmt.Errorf("%s: %w", c.topic, errTopicDeleted)
			}
			if !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		var werr error
		fetches.EachRecord(func(r *kgo.Record) {
			if werr != nil || c.done() {
				return
			}
			if c.remaining != nil {
				end, ok := c.remaining[r.Partition]
				if !ok || r.Offset >= end {
					return
				}
				if r.Offset+1 >= end {
					delete(c.remaining, r.Partition)
				}
			}
			c.seen++
			werr = c.format.write(c.out, r)
			if c.mark {
				c.cl.MarkCommitRecords(r)
			}
		})
		if werr != nil {
			return werr
		}
		if err := c.out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// watchTopic asks the brokers every topicCheckEvery whether the topic
// still exists (with the same ID), and cancels ctx with errTopicDeleted
// when it does not. It returns when ctx ends.
func (c *consumer) watchTopic(ctx context.Context, cancel context.CancelCauseFunc) {
	adm := kadm.NewClient(c.cl)
	var id kadm.TopicID
	t := time.NewTicker(topicCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		md, err := adm.Metadata(rctx, c.topic)
		rcancel()
		if err != nil {
			continue // unreachable for now: the fetches will say more
		}
		td, ok := md.Topics[c.topic]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			cancel(fmt.Errorf("%s: %w", c.topic, errTopicDeleted))
			return
		case td.Err != nil:
		case id == kadm.TopicID{}:
			id = td.ID
		case td.ID != id && td.ID != (kadm.TopicID{}):
			cancel(fmt.Errorf("%s: %w (a topic of that name was created again)", c.topic, errTopicDeleted))
			return
		}
	}
}
