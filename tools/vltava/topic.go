package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topicCommands = []command{
	{path: "topic create", args: "NAME", summary: "create a topic", run: topicCreate},
	{path: "topic list", summary: "list topics, one per line", run: topicList},
	{path: "topic describe", args: "NAME", summary: "show partitions, offsets and non-default configs", run: topicDescribe},
	{path: "topic delete", args: "NAME", summary: "delete a topic", run: topicDelete},
	{path: "topic alter-config", args: "NAME", summary: "set (-c) or reset (-d) topic configs", run: topicAlterConfig},
}

func topicCreate(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	partitions := f.Int("p", -1, "partitions (-1: the broker's num.partitions)")
	rf := f.Int("r", -1, "replication factor (-1: the broker's default.replication.factor)")
	var cfgs listFlag
	f.Var(&cfgs, "c", "topic config key=value (repeatable)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kvs, err := keyValues(cfgs)
	if err != nil {
		return err
	}
	configs := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		configs[kv[0]] = &kv[1]
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*rf), configs, pos[0])
		if err != nil {
			return fmt.Errorf("create %s: %w%s", pos[0], err, detail(resp.ErrMessage))
		}
		fmt.Fprintf(e.stdout, "created topic %s (partitions %d, replication factor %d)\n",
			resp.Topic, resp.NumPartitions, resp.ReplicationFactor)
		return nil
	})
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func topicList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		tds, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		names := tds.Names()
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintln(e.stdout, n)
		}
		return nil
	})
}

func topicDescribe(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	name := pos[0]
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		tds, err := adm.ListTopics(ctx, name)
		if err != nil {
			return err
		}
		td, ok := tds[name]
		if !ok || !tds.Has(name) {
			return fmt.Errorf("topic %s does not exist", name)
		}
		if td.Err != nil {
			return fmt.Errorf("describe %s: %w", name, td.Err)
		}
		starts, err := adm.ListStartOffsets(ctx, name)
		if err != nil {
			return fmt.Errorf("list start offsets: %w", err)
		}
		ends, err := adm.ListEndOffsets(ctx, name)
		if err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			return fmt.Errorf("describe configs: %w", err)
		}
		fmt.Fprintf(e.stdout, "topic %s  partitions %d  replication factor %d\n",
			name, len(td.Partitions), td.Partitions.NumReplicas())
		writeOverrides(e, rcs)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS\tISR\tLOG-START\tLOG-END")
		for _, p := range td.Partitions.Sorted() {
			s, _ := starts.Lookup(name, p.Partition)
			end, _ := ends.Lookup(name, p.Partition)
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%d\n", p.Partition, p.Leader,
				ints(p.Replicas), ints(p.ISR), s.Offset, end.Offset)
		}
		return tw.Flush()
	})
}

// writeOverrides prints the configs set on the topic itself.
func writeOverrides(e *env, rcs kadm.ResourceConfigs) {
	var set []string
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				set = append(set, cfg.Key+"="+cfg.MaybeValue())
			}
		}
	}
	slices.Sort(set)
	if len(set) == 0 {
		fmt.Fprintln(e.stdout, "configs: (defaults)")
		return
	}
	fmt.Fprintln(e.stdout, "configs: "+strings.Join(set, " "))
}

func ints(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func topicDelete(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resp, err := adm.DeleteTopic(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("delete %s: %w%s", pos[0], err, detail(resp.ErrMessage))
		}
		fmt.Fprintf(e.stdout, "deleted topic %s\n", pos[0])
		return nil
	})
}

func topicAlterConfig(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var sets, dels listFlag
	f.Var(&sets, "c", "set config key=value (repeatable)")
	f.Var(&dels, "d", "reset config key to its default (repeatable)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kvs, err := keyValues(sets)
	if err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	for _, kv := range kvs {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[0], Value: &kv[1]})
	}
	for _, k := range dels {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		f.Usage()
		return errUsage
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resps, err := adm.AlterTopicConfigs(ctx, alters, pos[0])
		if err != nil {
			return err
		}
		for _, r := range resps {
			if r.Err != nil {
				return fmt.Errorf("alter %s: %w%s", r.Name, r.Err, detail(r.ErrMessage))
			}
		}
		fmt.Fprintf(e.stdout, "altered topic %s (%d changes)\n", pos[0], len(alters))
		return nil
	})
}
