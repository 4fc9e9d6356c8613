package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topicCommands = []command{
	{path: "topic create", args: "NAME", summary: "create a topic (and wait until every broker serves it)", run: topicCreate},
	{path: "topic list", summary: "list topics with partitions, replication factor and under-replicated partitions", run: topicList},
	{path: "topic describe", args: "NAME | --under-replicated", summary: "show partitions, offsets and non-default configs; --under-replicated: the partitions whose ISR lacks a replica, of NAME or of every topic", run: topicDescribe},
	{path: "topic delete", args: "NAME...", summary: "delete topics", run: topicDelete},
	{path: "topic alter-config", args: "NAME", summary: "set (-c) or reset (-d) topic configs", run: topicAlterConfig},
	{path: "topic add-partitions", args: "NAME", summary: "add partitions (--count N more, or --total N)", run: topicAddPartitions},
	{path: "topic trim", args: "NAME", summary: "delete the records before an offset (Kafka's DeleteRecords)", run: topicTrim},
}

func topicCreate(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	partitions := f.Int("p", -1, "partitions (-1: the broker's num.partitions)")
	rf := f.Int("r", -1, "replication factor (-1: the broker's default.replication.factor)")
	var cfgs listFlag
	f.Var(&cfgs, "c", "topic config `key=value` (repeatable)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kvs, err := keyValues(cfgs)
	if err != nil {
		return usagef("-c: %v", err)
	}
	configs := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		configs[kv[0]] = &kv[1]
	}
	return e.adminClient(ctx, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*rf), configs, pos[0])
		if err != nil {
			return fmt.Errorf("create %s: %w%s", pos[0], err, detail(resp.ErrMessage))
		}
		fmt.Fprintf(e.stdout, "created topic %s (partitions %d, replication factor %d)\n",
			resp.Topic, resp.NumPartitions, resp.ReplicationFactor)
		if err := waitTopicServed(ctx, cl, adm, resp.Topic, int(resp.NumPartitions)); err != nil {
			fmt.Fprintf(e.stderr, "vltava: note: %s created, but not yet served by every broker: %v\n", resp.Topic, err)
		}
		return nil
	})
}

// servedWait bounds how long a command waits for a topic it changed to
// reach every broker before it says so and returns.
const servedWait = 15 * time.Second

// waitTopicServed waits until every broker's metadata shows the topic with
// its partitions and a leader for each, and each leader answers ListOffsets
// for it: what a command that follows (describe, produce) needs. It gives up
// when ctx ends.
func waitTopicServed(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, servedWait)
	defer cancel()
	var last error
	for {
		if last = topicServed(ctx, cl, adm, topic, partitions); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// knownToSomeBroker reports whether any broker's metadata has the topic
// (a topic that some broker knows is still on its way to the others).
func knownToSomeBroker(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) bool {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return false
	}
	for _, b := range md.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 {
			return true
		}
	}
	return false
}

func topicServed(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, partitions int) error {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	for _, b := range md.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return fmt.Errorf("broker %d: %w", b.NodeID, err)
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("broker %d: no answer for the topic", b.NodeID)
		}
		t := resp.Topics[0]
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("broker %d: %w", b.NodeID, err)
		}
		if len(t.Partitions) < partitions {
			return fmt.Errorf("broker %d knows %d of %d partitions", b.NodeID, len(t.Partitions), partitions)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("broker %d: partition %d has no leader", b.NodeID, p.Partition)
			}
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	return err
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func topicList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	output := outputFlag(f)
	internal := f.Bool("internal", false, "include internal topics (__consumer_offsets)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		var tds kadm.TopicDetails
		var err error
		if *internal {
			tds, err = adm.ListTopicsWithInternal(ctx)
		} else {
			tds, err = adm.ListTopics(ctx)
		}
		if err != nil {
			return err
		}
		t := newTable("TOPIC", "PARTITIONS", "REPLICATION", "UNDER-REPLICATED", "OFFLINE")
		for _, td := range tds.Sorted() {
			under, offline := 0, 0
			for _, p := range td.Partitions {
				if len(p.ISR) < len(p.Replicas) {
					under++
				}
				if p.Leader < 0 {
					offline++
				}
			}
			t.add(td.Topic, len(td.Partitions), td.Partitions.NumReplicas(), under, offline)
		}
		return t.write(e.stdout, *output)
	})
}

// describeRetryFor bounds how long describe waits for partition leaders
// that do not answer yet (a topic just created in a cluster); a topic that
// no broker knows is retried for a second only.
const describeRetryFor = 5 * time.Second

func topicDescribe(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	output := outputFlag(f)
	under := f.Bool("under-replicated", false, "list only partitions whose ISR is smaller than their replica set (every topic unless NAME is given)")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if *under {
		return underReplicated(ctx, e, pos, *output)
	}
	if len(pos) == 0 {
		f.Usage()
		return errUsage
	}
	name := pos[0]
	return e.adminClient(ctx, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		var (
			td           kadm.TopicDetail
			starts, ends kadm.ListedOffsets
			err          error
		)
		// A topic just created in a cluster may not have reached every
		// broker, nor its leaders their partitions: retry for a moment.
		began := time.Now()
		for {
			td, starts, ends, err = describeOnce(ctx, adm, name)
			waited := time.Since(began)
			if err == nil || waited > min(describeRetryFor, e.timeout) || ctx.Err() != nil ||
				(errors.Is(err, errNoTopic) && waited > time.Second && !knownToSomeBroker(ctx, cl, adm, name)) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			return fmt.Errorf("describe configs: %w", err)
		}
		t := newTable("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START", "LOG-END")
		for _, p := range td.Partitions.Sorted() {
			s, _ := starts.Lookup(name, p.Partition)
			end, _ := ends.Lookup(name, p.Partition)
			t.add(p.Partition, p.Leader, p.Replicas, p.ISR, s.Offset, end.Offset)
		}
		overrides := topicOverrides(rcs)
		if *output == "json" {
			return jsonOut(e.stdout, map[string]any{
				"topic": name, "id": td.ID.String(), "partitions": t.objects(),
				"replication_factor": td.Partitions.NumReplicas(), "configs": overrides,
			})
		}
		fmt.Fprintf(e.stdout, "topic %s  partitions %d  replication factor %d\n",
			name, len(td.Partitions), td.Partitions.NumReplicas())
		writeOverrides(e, overrides)
		return t.write(e.stdout, "table")
	})
}

// describeOnce reads the topic's metadata and its partitions' offsets from
// their leaders. A partition whose leader cannot answer yet is an error.
func describeOnce(ctx context.Context, adm *kadm.Client, name string) (kadm.TopicDetail, kadm.ListedOffsets, kadm.ListedOffsets, error) {
	var td kadm.TopicDetail
	if err := topicExists(ctx, adm, name); err != nil {
		return td, nil, nil, err
	}
	tds, err := adm.ListTopics(ctx, name)
	if err != nil {
		return td, nil, nil, err
	}
	td, ok := tds[name]
	if !ok {
		return td, nil, nil, fmt.Errorf("topic %s does not exist", name)
	}
	if td.Err != nil {
		return td, nil, nil, fmt.Errorf("describe %s: %w", name, td.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return td, nil, nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return td, nil, nil, fmt.Errorf("list end offsets: %w", err)
	}
	return td, starts, ends, nil
}

// topicOverrides lists the configs set on the topic itself, sorted.
func topicOverrides(rcs kadm.ResourceConfigs) map[string]string {
	set := map[string]string{}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				set[cfg.Key] = cfg.MaybeValue()
			}
		}
	}
	return set
}

func writeOverrides(e *env, set map[string]string) {
	if len(set) == 0 {
		fmt.Fprintln(e.stdout, "configs: (defaults)")
		return
	}
	var kv []string
	for k, v := range set {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	fmt.Fprintln(e.stdout, "configs: "+strings.Join(kv, " "))
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
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resps, err := adm.DeleteTopics(ctx, pos...)
		if err != nil {
			return err
		}
		var errs []error
		for _, name := range pos {
			r, ok := resps[name]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("delete %s: no answer for the topic", name))
			case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
				errs = append(errs, fmt.Errorf("delete %s: topic does not exist", name))
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("delete %s: %w%s", name, r.Err, detail(r.ErrMessage)))
			default:
				fmt.Fprintf(e.stdout, "deleted topic %s\n", name)
			}
		}
		return errors.Join(errs...)
	})
}

func topicAlterConfig(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var sets, dels listFlag
	f.Var(&sets, "c", "set config `key=value` (repeatable)")
	f.Var(&dels, "d", "reset config `key` to its default (repeatable)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	kvs, err := keyValues(sets)
	if err != nil {
		return usagef("-c: %v", err)
	}
	var alters []kadm.AlterConfig
	for _, kv := range kvs {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[0], Value: &kv[1]})
	}
	for _, k := range dels {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return usagef("give at least one -c key=value or -d key")
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

func topicAddPartitions(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	count := f.Int("count", 0, "add `N` partitions")
	total := f.Int("total", 0, "grow the topic to `N` partitions in all (kafka-topics --alter --partitions)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if (*count > 0) == (*total > 0) || *count < 0 || *total < 0 {
		return usagef("give one of --count N (partitions to add) or --total N (partitions in all), N > 0")
	}
	name := pos[0]
	return e.adminClient(ctx, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		var resps kadm.CreatePartitionsResponses
		if *count > 0 {
			resps, err = adm.CreatePartitions(ctx, *count, name)
		} else {
			resps, err = adm.UpdatePartitions(ctx, *total, name)
		}
		if err != nil {
			return err
		}
		r, ok := resps[name]
		if !ok {
			return fmt.Errorf("add partitions to %s: no answer for the topic", name)
		}
		if r.Err != nil {
			return fmt.Errorf("add partitions to %s: %w%s", name, r.Err, detail(r.ErrMessage))
		}
		want := *total
		if want == 0 {
			md, err := adm.ListTopics(ctx, name)
			if err != nil {
				return err
			}
			want = len(md[name].Partitions) // at least; the wait below settles it
		}
		if err := waitTopicServed(ctx, cl, adm, name, want); err != nil {
			fmt.Fprintf(e.stderr, "vltava: note: not yet served by every broker: %v\n", err)
		}
		md, err := adm.ListTopics(ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "topic %s now has %d partitions\n", name, len(md[name].Partitions))
		return nil
	})
}

func topicTrim(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	before := f.String("before", "", "delete the records before `OFFSET` in each partition: an offset, end (everything), or -N (keep the last N)")
	partition := f.Int("partition", -1, "trim only this partition (-1: all)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *before == "" {
		return usagef("--before OFFSET|end|-N is required")
	}
	var kind byte
	var n int64
	switch {
	case *before == "end":
		kind = 'e'
	case strings.HasPrefix(*before, "-"):
		kind = 'r'
		n, err = strconv.ParseInt((*before)[1:], 10, 64)
	default:
		kind = 'o'
		n, err = strconv.ParseInt(*before, 10, 64)
	}
	if err != nil || n < 0 {
		return usagef("--before %q: want an offset, end or -N", *before)
	}
	name := pos[0]
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		if err := topicExists(ctx, adm, name); err != nil {
			return err
		}
		ends, err := adm.ListEndOffsets(ctx, name)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		var os kadm.Offsets
		ends.Each(func(o kadm.ListedOffset) {
			if *partition >= 0 && o.Partition != int32(*partition) {
				return
			}
			at := n
			switch kind {
			case 'e':
				at = o.Offset
			case 'r':
				at = max(0, o.Offset-n)
			}
			os.Add(kadm.Offset{Topic: name, Partition: o.Partition, At: min(at, o.Offset)})
		})
		if len(os) == 0 {
			return fmt.Errorf("topic %s has no partition %d", name, *partition)
		}
		resps, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			return err
		}
		var errs []error
		var all []kadm.DeleteRecordsResponse
		for _, ps := range resps {
			for _, r := range ps {
				all = append(all, r)
			}
		}
		slices.SortFunc(all, func(a, b kadm.DeleteRecordsResponse) int { return int(a.Partition - b.Partition) })
		for _, r := range all {
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("trim %s/%d: %w", r.Topic, r.Partition, r.Err))
				continue
			}
			fmt.Fprintf(e.stdout, "%s/%d: log starts at %d\n", r.Topic, r.Partition, r.LowWatermark)
		}
		return errors.Join(errs...)
	})
}

// errNoTopic is the end of "topic T does not exist".
var errNoTopic = errors.New("does not exist")

// topicExists returns an error saying "topic T does not exist" when the
// brokers do not know the topic.
func topicExists(ctx context.Context, adm *kadm.Client, topic string) error {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	td, ok := md.Topics[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) || errors.Is(td.Err, kerr.UnknownTopicID) {
		return fmt.Errorf("topic %s %w", topic, errNoTopic)
	}
	if td.Err != nil {
		return fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	return nil
}

// underReplicated lists the partitions of topics (every topic when none is
// named) whose ISR lacks one of their replicas, as kafka-topics.sh
// --describe --under-replicated-partitions does.
func underReplicated(ctx context.Context, e *env, topics []string, output string) error {
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		md, err := adm.Metadata(ctx, topics...)
		if err != nil {
			return err
		}
		t := newTable("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "MISSING")
		for _, td := range md.Topics.Sorted() {
			if td.Err != nil {
				return fmt.Errorf("%s: %w", td.Topic, td.Err)
			}
			for _, p := range td.Partitions.Sorted() {
				if len(p.ISR) >= len(p.Replicas) {
					continue
				}
				var missing []int32
				for _, r := range p.Replicas {
					if !slices.Contains(p.ISR, r) {
						missing = append(missing, r)
					}
				}
				t.add(td.Topic, p.Partition, p.Leader, p.Replicas, p.ISR, missing)
			}
		}
		return t.write(e.stdout, output)
	})
}
