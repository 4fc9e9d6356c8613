package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// resetTarget is where reset-offsets moves each partition.
type resetTarget struct {
	kind  string // earliest, latest, timestamp, offset
	value int64  // the timestamp or offset
}

// parseResetTarget checks that exactly one --to-* flag was given.
func parseResetTarget(earliest, latest bool, ts, off string) (resetTarget, error) {
	var ts64, off64 int64
	var got []resetTarget
	if earliest {
		got = append(got, resetTarget{kind: "earliest"})
	}
	if latest {
		got = append(got, resetTarget{kind: "latest"})
	}
	if ts != "" {
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || n < 0 {
			return resetTarget{}, fmt.Errorf("--to-timestamp %q: want milliseconds since the epoch", ts)
		}
		ts64 = n
		got = append(got, resetTarget{kind: "timestamp", value: ts64})
	}
	if off != "" {
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil || n < 0 {
			return resetTarget{}, fmt.Errorf("--to-offset %q: want an offset >= 0", off)
		}
		off64 = n
		got = append(got, resetTarget{kind: "offset", value: off64})
	}
	if len(got) != 1 {
		return resetTarget{}, fmt.Errorf("%w: give exactly one of --to-earliest, --to-latest, --to-timestamp MS, --to-offset N", errUsage)
	}
	return got[0], nil
}

// topicSpec is one --topic: a topic and optionally some of its partitions.
type topicSpec struct {
	topic      string
	partitions []int32 // nil: all
}

func parseTopicSpec(s string) (topicSpec, error) {
	t, ps, ok := strings.Cut(s, ":")
	if t == "" {
		return topicSpec{}, fmt.Errorf("--topic %q: want TOPIC or TOPIC:P[,P...]", s)
	}
	spec := topicSpec{topic: t}
	if !ok {
		return spec, nil
	}
	for _, p := range strings.Split(ps, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return topicSpec{}, fmt.Errorf("--topic %q: bad partition %q", s, p)
		}
		spec.partitions = append(spec.partitions, int32(n))
	}
	return spec, nil
}

func groupResetOffsets(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var topics listFlag
	f.Var(&topics, "topic", "TOPIC or TOPIC:P[,P...] to reset (repeatable)")
	all := f.Bool("all-topics", false, "reset every topic the group has committed offsets for")
	earliest := f.Bool("to-earliest", false, "move to each partition's log start offset")
	latest := f.Bool("to-latest", false, "move to each partition's log end offset")
	ts := f.String("to-timestamp", "", "move to the first offset with a timestamp >= MS (epoch milliseconds); the log end if none")
	off := f.String("to-offset", "", "move to offset N, clamped to [log start, log end]")
	execute := f.Bool("execute", false, "commit the new offsets (without it, only print the plan)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	target, err := parseResetTarget(*earliest, *latest, *ts, *off)
	if err != nil {
		return err
	}
	if len(topics) == 0 && !*all {
		return fmt.Errorf("%w: give --topic TOPIC[:P,...] (repeatable) or --all-topics", errUsage)
	}
	var specs []topicSpec
	for _, s := range topics {
		spec, err := parseTopicSpec(s)
		if err != nil {
			return err
		}
		specs = append(specs, spec)
	}
	group := pos[0]
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		if err := checkInactive(ctx, adm, group); err != nil {
			return err
		}
		current, err := adm.FetchOffsets(ctx, group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			current, err = kadm.OffsetResponses{}, nil // a new group
		}
		if err != nil {
			return fmt.Errorf("fetch committed offsets of %s: %w", group, err)
		}
		if *all {
			for _, t := range current.Offsets().TopicsSet().Sorted() {
				specs = append(specs, topicSpec{topic: t.Topic})
			}
		}
		plan, err := planReset(ctx, adm, specs, target)
		if err != nil {
			return err
		}
		if len(plan) == 0 {
			return errors.New("no partitions to reset")
		}
		printPlan(e, plan, current)
		if !*execute {
			fmt.Fprintln(e.stdout, "dry run: nothing committed; add --execute to apply")
			return nil
		}
		// The group may have gained members since the check; the broker
		// then refuses the commit (UNKNOWN_MEMBER_ID or similar).
		rs, err := adm.CommitOffsets(ctx, group, plan)
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if err := rs.Error(); err != nil {
			return fmt.Errorf("commit: %w (if consumers joined meanwhile, stop them and retry)", err)
		}
		fmt.Fprintf(e.stdout, "committed new offsets for %d partitions of group %s\n", len(plan.Sorted()), group)
		return nil
	})
}

// checkInactive refuses a group that has members: a live consumer would
// overwrite the reset with its own commits.
func checkInactive(ctx context.Context, adm *kadm.Client, group string) error {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe %s: %w", group, err)
	}
	d, ok := ds[group]
	if !ok {
		return fmt.Errorf("describe %s: no answer for the group", group)
	}
	if errors.Is(d.Err, kerr.GroupIDNotFound) {
		return nil // a new group: nothing consumes it
	}
	if d.Err != nil {
		return fmt.Errorf("describe %s: %w", group, d.Err)
	}
	if n := len(d.Members); n > 0 {
		return fmt.Errorf("group %s has %d active member(s) (state %s); offsets can only be reset while it has none: "+
			"stop its consumers, or wait session.timeout.ms after they stopped, until 'vltava group describe %s' shows state Empty, then retry",
			group, n, d.State, group)
	}
	return nil
}

// planReset resolves the target offset of every requested partition.
func planReset(ctx context.Context, adm *kadm.Client, specs []topicSpec, target resetTarget) (kadm.Offsets, error) {
	var names []string
	for _, s := range specs {
		if !slices.Contains(names, s.topic) {
			names = append(names, s.topic)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var at kadm.ListedOffsets
	if target.kind == "timestamp" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, target.value, names...); err != nil {
			return nil, fmt.Errorf("list offsets for time: %w", err)
		}
	}
	plan := kadm.Offsets{}
	for _, s := range specs {
		ps := s.partitions
		if ps == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if o.Topic == s.topic && o.Partition >= 0 {
					ps = append(ps, o.Partition)
				}
			})
			if len(ps) == 0 {
				return nil, fmt.Errorf("topic %s does not exist", s.topic)
			}
		}
		for _, p := range ps {
			st, ok1 := starts.Lookup(s.topic, p)
			en, ok2 := ends.Lookup(s.topic, p)
			if !ok1 || !ok2 || st.Err != nil || en.Err != nil {
				return nil, fmt.Errorf("partition %s:%d does not exist or has no offsets", s.topic, p)
			}
			var n int64
			switch target.kind {
			case "earliest":
				n = st.Offset
			case "latest":
				n = en.Offset
			case "offset":
				n = min(max(target.value, st.Offset), en.Offset)
			case "timestamp":
				n = en.Offset
				if o, ok := at.Lookup(s.topic, p); ok && o.Err == nil && o.Offset >= 0 {
					n = o.Offset
				}
			}
			plan.Add(kadm.Offset{Topic: s.topic, Partition: p, At: n, LeaderEpoch: -1})
		}
	}
	return plan, nil
}

func printPlan(e *env, plan kadm.Offsets, current kadm.OffsetResponses) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW")
	for _, o := range plan.Sorted() {
		cur := "-"
		if c, ok := current.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			cur = strconv.FormatInt(c.At, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", o.Topic, o.Partition, cur, o.At)
	}
	tw.Flush()
}
