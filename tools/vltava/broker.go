package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

var brokerCommands = []command{
	{path: "broker list", summary: "list the brokers with their address, rack and the controller", run: brokerList},
}

func brokerList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	output := outputFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		t := newTable("ID", "ADDRESS", "RACK", "CONTROLLER")
		for _, b := range md.Brokers {
			rack := ""
			if b.Rack != nil {
				rack = *b.Rack
			}
			t.add(b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), rack, b.NodeID == md.Controller)
		}
		return t.write(e.stdout, *output)
	})
}

var partitionCommands = []command{
	{path: "partition reassign", args: "TOPIC PARTITION", summary: "move a partition to --replicas (the first is the preferred leader)", run: partitionReassign},
	{path: "partition elect-leaders", args: "[TOPIC[:P,...]...]", summary: "elect the preferred (or with --unclean any live) replica as leader; all partitions by default", run: partitionElectLeaders},
}

func partitionReassign(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	replicas := f.String("replicas", "", "the new replica `IDS`, comma-separated, preferred leader first")
	cancel := f.Bool("cancel", false, "cancel an ongoing reassignment of the partition instead")
	wait := f.Bool("wait", false, "wait (at most --timeout) until the partition has moved: its replicas are --replicas, all in the ISR; a progress bar on a terminal")
	pos, err := f.parse(args, 2, 2)
	if err != nil {
		return err
	}
	p, err := strconv.ParseInt(pos[1], 10, 32)
	if err != nil || p < 0 {
		return usagef("partition %q: want a partition number", pos[1])
	}
	var ids []int32
	if !*cancel {
		if ids, err = parseIDs(*replicas); err != nil || len(ids) == 0 {
			return usagef("--replicas %q: want broker IDs such as 1,2,3", *replicas)
		}
	}
	topic := pos[0]
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, int32(p), ids) // nil cancels
		resps, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range resps.Sorted() {
			if r.Err != nil {
				return fmt.Errorf("reassign %s/%d: %w%s", r.Topic, r.Partition, r.Err, detail(r.ErrMessage))
			}
		}
		if *cancel {
			fmt.Fprintf(e.stdout, "cancelled the reassignment of %s/%d\n", topic, p)
			return nil
		}
		fmt.Fprintf(e.stdout, "reassigning %s/%d to replicas %s\n", topic, p, ints(ids))
		if !*wait {
			return nil
		}
		if err := awaitReassignment(ctx, e, adm, topic, int32(p), ids); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "moved %s/%d: replicas %s, all in sync\n", topic, p, ints(ids))
		return nil
	})
}

// awaitReassignment polls until topic/p has no ongoing reassignment and
// its replicas are ids, every one in the ISR. The progress bar counts the
// new replicas in the ISR.
func awaitReassignment(ctx context.Context, e *env, adm *kadm.Client, topic string, p int32, ids []int32) error {
	var inSync atomic.Int64
	bar := startProgress(e, fmt.Sprintf("moving %s/%d", topic, p), false, func() (int64, int64) { return inSync.Load(), int64(len(ids)) })
	defer bar.Stop()
	want := slices.Sorted(slices.Values(ids))
	for {
		moving, replicas, isr, err := partitionMove(ctx, adm, topic, p)
		if err == nil {
			inSync.Store(int64(len(slices.DeleteFunc(slices.Clone(want), func(id int32) bool { return !slices.Contains(isr, id) }))))
			slices.Sort(replicas)
			if !moving && slices.Equal(replicas, want) && inSync.Load() == int64(len(want)) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reassign %s/%d: not moved yet (replicas %s, isr %s; --timeout to wait longer): %w", topic, p, ints(replicas), ints(isr), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// partitionMove reports whether topic/p is being reassigned and its
// current replicas and ISR.
func partitionMove(ctx context.Context, adm *kadm.Client, topic string, p int32) (moving bool, replicas, isr []int32, err error) {
	ongoing, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {p: {}}})
	if err != nil {
		return false, nil, nil, err
	}
	r, moving := ongoing[topic][p]
	moving = moving && (len(r.AddingReplicas) > 0 || len(r.RemovingReplicas) > 0)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return false, nil, nil, err
	}
	pd, ok := td[topic].Partitions[p]
	if !ok {
		return false, nil, nil, fmt.Errorf("reassign %s/%d: no such partition in metadata", topic, p)
	}
	return moving, slices.Clone(pd.Replicas), slices.Clone(pd.ISR), nil
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a broker or partition ID", f)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

func partitionElectLeaders(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	unclean := f.Bool("unclean", false, "elect any live replica when no in-sync one is (may lose acknowledged records)")
	output := outputFlag(f)
	pos, err := f.parse(args, 0, -1)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	var set kadm.TopicsSet
	for _, a := range pos {
		topic, ps, hasPs := strings.Cut(a, ":")
		if topic == "" {
			return usagef("%q: want TOPIC or TOPIC:P,...", a)
		}
		ids, err := parseIDs(ps)
		if err != nil || (hasPs && len(ids) == 0) {
			return usagef("%q: want TOPIC or TOPIC:P,...", a)
		}
		set.Add(topic, ids...)
	}
	how := kadm.ElectPreferredReplica
	if *unclean {
		how = kadm.ElectLiveReplica
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		// A topic named without partitions means all of its partitions.
		for _, topic := range set.EmptyTopics() {
			tds, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			td, ok := tds[topic]
			if !ok || td.Err != nil {
				return fmt.Errorf("topic %s does not exist", topic)
			}
			for p := range td.Partitions {
				set.Add(topic, p)
			}
		}
		res, err := adm.ElectLeaders(ctx, how, set)
		if err != nil {
			return err
		}
		t := newTable("TOPIC", "PARTITION", "RESULT")
		var failed int
		var all []kadm.ElectLeadersResult
		for _, ps := range res {
			for _, r := range ps {
				all = append(all, r)
			}
		}
		slices.SortFunc(all, func(a, b kadm.ElectLeadersResult) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		for _, r := range all {
			switch {
			case r.Err == nil:
				t.add(r.Topic, r.Partition, "elected")
			case r.Err == kerr.ElectionNotNeeded:
				t.add(r.Topic, r.Partition, "already led by the preferred replica")
			default:
				failed++
				t.add(r.Topic, r.Partition, r.Err.Error()+detail(r.ErrMessage))
			}
		}
		if err := t.write(e.stdout, *output); err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("elect leaders: %d partition(s) failed", failed)
		}
		return nil
	})
}
