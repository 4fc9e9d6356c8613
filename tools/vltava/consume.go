package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var consumeCommands = []command{
	{path: "consume", args: "TOPIC", summary: "print records (--from start|end|OFFSET|@TIMESTAMP_MS)", run: consumeCmd},
}

// from is a parsed --from: the start, the end, an offset, or the first
// offset at or after a Unix-millisecond timestamp.
type from struct {
	kind  byte  // 's' start, 'e' end, 'o' offset, 't' timestamp
	value int64 // the offset or the timestamp
}

func parseFrom(s string) (from, error) {
	switch {
	case s == "start":
		return from{kind: 's'}, nil
	case s == "end":
		return from{kind: 'e'}, nil
	case strings.HasPrefix(s, "@"):
		ms, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || ms < 0 {
			return from{}, fmt.Errorf("--from %q: want @ followed by Unix milliseconds", s)
		}
		return from{kind: 't', value: ms}, nil
	default:
		off, err := strconv.ParseInt(s, 10, 64)
		if err != nil || off < 0 {
			return from{}, fmt.Errorf("--from %q: want start, end, an offset or @TIMESTAMP_MS", s)
		}
		return from{kind: 'o', value: off}, nil
	}
}

// startPositions resolves f into an exact offset per partition (the
// timestamp through ListOffsets), and also returns the end offsets at this
// moment (for --until-end). partition < 0 means all partitions.
func startPositions(ctx context.Context, adm *kadm.Client, topic string, partition int32, f from) (starts, ends map[int32]int64, err error) {
	endList, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("list end offsets: %w", err)
	}
	if err := endList.Error(); err != nil {
		return nil, nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	list := endList
	switch f.kind {
	case 's':
		list, err = adm.ListStartOffsets(ctx, topic)
	case 't':
		list, err = adm.ListOffsetsAfterMilli(ctx, f.value, topic)
	}
	if err == nil {
		err = list.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list offsets: %w", err)
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	list.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic || (partition >= 0 && o.Partition != partition) {
			return
		}
		starts[o.Partition] = o.Offset
		if f.kind == 'o' {
			starts[o.Partition] = f.value
		}
	})
	endList.Each(func(o kadm.ListedOffset) {
		if _, ok := starts[o.Partition]; ok {
			ends[o.Partition] = o.Offset
		}
	})
	if len(starts) == 0 {
		return nil, nil, fmt.Errorf("topic %s has no partition %d", topic, partition)
	}
	return starts, ends, nil
}

func consumeCmd(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	fromFlag := f.String("from", "start", "start, end, an offset, or @TIMESTAMP_MS")
	n := f.Int("n", 0, "stop after N records (0: no limit)")
	partition := f.Int("partition", -1, "consume only this partition (-1: all)")
	format := f.String("format", defaultFormat, formatHelp)
	untilEnd := f.Bool("until-end", false, "stop at the end offsets seen at start")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	rf, err := parseFormat(*format)
	if err != nil {
		return err
	}
	start, err := parseFrom(*fromFlag)
	if err != nil {
		return err
	}
	topic := pos[0]
	var starts, ends map[int32]int64
	err = e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		starts, ends, err = startPositions(ctx, adm, topic, int32(*partition), start)
		return err
	})
	if err != nil {
		return err
	}
	offsets := make(map[int32]kgo.Offset, len(starts))
	for p, o := range starts {
		offsets[p] = kgo.NewOffset().At(o)
	}
	cl, err := e.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	c2 := consumer{cl: cl, format: rf, out: out, limit: *n}
	if *untilEnd {
		c2.remaining = map[int32]int64{}
		for p, end := range ends {
			if starts[p] < end {
				c2.remaining[p] = end
			}
		}
	}
	return c2.run(ctx)
}

// consumer prints records until its limit or the captured end offsets.
type consumer struct {
	cl     *kgo.Client
	format recordFormat
	out    *bufio.Writer
	limit  int // 0: none
	// remaining, when non-nil, maps each unfinished partition to the end
	// offset to stop at; consumption ends when it is empty.
	remaining map[int32]int64
	seen      int
}

func (c *consumer) done() bool {
	return (c.limit > 0 && c.seen >= c.limit) || (c.remaining != nil && len(c.remaining) == 0)
}

func (c *consumer) run(ctx context.Context) error {
	for !c.done() {
		fetches := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: a normal way to stop
		}
		for _, fe := range fetches.Errors() {
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
