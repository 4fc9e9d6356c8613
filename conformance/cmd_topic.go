package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type kmsgRequester = kmsg.Requestor

// errName names a Kafka error code ("NONE" for 0).
func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprintf("UNKNOWN_CODE_%d", code)
}

// topic create NAME [-partitions N] [-rf N] [-config k=v]...
// topic alter-config NAME k=v...
func cmdTopic(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: topic create|alter-config|delete|partitions|describe-config NAME ...")
	}
	s := st(ts)
	name := s.topic(ts, args[1])
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	switch args[0] {
	case "create":
		const usage = "topic create NAME [-partitions N] [-rf N] [-config key=value]..."
		cfg := kvFlag{}
		fs := flag.NewFlagSet("topic", flag.ContinueOnError)
		parts := fs.Int("partitions", 1, "partitions")
		rf := fs.Int("rf", 1, "replication factor")
		fs.Var(cfg, "config", "topic config key=value")
		parse(ts, fs, args, 2, usage)
		configs := map[string]*string{}
		for k, v := range cfg {
			configs[k] = kadm.StringPtr(v)
		}
		resp, err := s.adm(ts).CreateTopic(ctx, int32(*parts), int16(*rf), configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			fmt.Fprintf(ts.Stdout(), "error=%s\n", kerrNameOr(err))
		} else {
			s.mu.Lock()
			s.created = append(s.created, name)
			s.mu.Unlock()
		}
		finish(ts, neg, err)
		if err == nil {
			awaitTopic(ts, name, int32(*parts))
		}
	case "alter-config":
		var alters []kadm.AlterConfig
		for _, kv := range args[2:] {
			m := kvFlag{}
			ts.Check(m.Set(kv))
			for k, v := range m {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
			}
		}
		resps, err := s.adm(ts).AlterTopicConfigs(ctx, alters, name)
		if err == nil {
			for _, r := range resps {
				if r.Err != nil {
					fmt.Fprintf(ts.Stdout(), "error=%s\n", kerrNameOr(r.Err))
				}
			}
		}
		if err == nil {
			for _, r := range resps {
				err = errors.Join(err, r.Err)
			}
		}
		if err == nil && !neg {
			// Best effort: a broker may answer a value in another
			// spelling; the script's own checks then decide.
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			if werr := awaitTopicConfigEverywhere(wctx, s.client(ts), name, alters); werr != nil {
				ts.Logf("%v", werr)
			}
			wcancel()
		}
		finish(ts, neg, err)
	case "delete":
		resps, err := s.adm(ts).DeleteTopics(ctx, name)
		if err == nil {
			err = resps.Error()
		}
		finish(ts, neg, err)
	case "partitions":
		// topic partitions NAME N: CreatePartitions up to N in total.
		if len(args) != 3 {
			ts.Fatalf("usage: topic partitions NAME N")
		}
		n := atoi32(ts, args[2])
		resps, err := s.adm(ts).UpdatePartitions(ctx, int(n), name)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			fmt.Fprintf(ts.Stdout(), "error=%s\n", kerrNameOr(err))
		}
		finish(ts, neg, err)
		if err == nil {
			awaitTopic(ts, name, n)
		}
	case "describe-config":
		// topic describe-config NAME KEY: prints KEY=VALUE source=SOURCE
		// (DescribeConfigs; sources as Kafka names them, KIP-226).
		if len(args) != 3 {
			ts.Fatalf("usage: topic describe-config NAME KEY")
		}
		rcs, err := s.adm(ts).DescribeTopicConfigs(ctx, name)
		if err == nil {
			var rc kadm.ResourceConfig
			if rc, err = rcs.On(name, nil); err == nil {
				err = rc.Err
			}
			for _, c := range rc.Configs {
				if c.Key == args[2] {
					fmt.Fprintf(ts.Stdout(), "%s=%s source=%s\n", c.Key, c.MaybeValue(), c.Source)
				}
			}
		}
		finish(ts, neg, err)
	default:
		ts.Fatalf("topic: unknown action %q", args[0])
	}
}

func kerrNameOr(err error) string {
	if n := kerrName(err); n != "" {
		return n
	}
	return "error"
}

// awaitTopic waits until every partition of topic has a leader, as seen
// by every broker that answers: metadata reaches the brokers of a cluster
// asynchronously (in Kafka as in Vltava), so one broker knowing the topic
// does not mean the next request, sent to another, finds it.
func awaitTopic(ts *testscript.TestScript, topic string, parts int32) {
	s := st(ts)
	awaitCond(ts, 30*time.Second, "leaders for "+topic, func() (bool, string) {
		cl := s.client(ts)
		for p := int32(0); p < parts; p++ {
			leader, _, err := partitionState(cl, topic, p)
			if err != nil || leader < 0 {
				return false, fmt.Sprintf("partition %d: leader %d %v", p, leader, err)
			}
		}
		for i, b := range cl.DiscoveredBrokers() {
			m, err := metadata(b, []string{topic})
			if err != nil {
				continue // down or unreachable: it learns the topic when back
			}
			if why := topicReady(m, topic, parts); why != "" {
				return false, fmt.Sprintf("discovered broker #%d: %s", i+1, why)
			}
		}
		return true, ""
	})
}

// topicReady says why m does not show a leader for every partition of
// topic ("" when it does).
func topicReady(m *kmsg.MetadataResponse, topic string, parts int32) string {
	for _, t := range m.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return errName(t.ErrorCode)
		}
		leaders := 0
		for _, p := range t.Partitions {
			if p.Partition < parts && p.Leader >= 0 {
				leaders++
			}
		}
		if leaders < int(parts) {
			return fmt.Sprintf("%d of %d partitions have a leader", leaders, parts)
		}
		return ""
	}
	return "topic not in metadata"
}

// offsetsOf returns a partition's log start offset and high watermark
// from ListOffsets (earliest, latest) sent to its leader.
func offsetsOf(cl kmsgRequester, topic string, part int32, isolation int8) (start, hw int64, err error) {
	get := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		// A partition between leaders (a broker restarting) answers a
		// retriable error for a moment; retry for up to 30s, as clients do.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := ctxFor(10 * time.Second)
			resp, err := req.RequestWith(ctx, cl)
			cancel()
			if err != nil && kerr.IsRetriable(err) && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond) // the client found no leader yet
				continue
			}
			if err != nil {
				return 0, err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return 0, fmt.Errorf("list offsets %s/%d: malformed response", topic, part)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode == 0 {
				return p.Offset, nil
			}
			if !kerr.IsRetriable(kerr.ErrorForCode(p.ErrorCode)) || time.Now().After(deadline) {
				return 0, fmt.Errorf("list offsets %s/%d: %s", topic, part, errName(p.ErrorCode))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if start, err = get(-2); err != nil {
		return
	}
	hw, err = get(-1)
	return
}

// offsets TOPIC PART: prints log-start=N high-watermark=N and sets
// $LOG_START and $HW.
func cmdOffsets(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: offsets TOPIC PART")
	}
	s := st(ts)
	start, hw, err := offsetsOf(s.client(ts), s.topic(ts, args[0]), atoi32(ts, args[1]), 0)
	finish(ts, neg, err)
	if err == nil {
		ts.Setenv("LOG_START", strconv.FormatInt(start, 10))
		ts.Setenv("HW", strconv.FormatInt(hw, 10))
		fmt.Fprintf(ts.Stdout(), "log-start=%d high-watermark=%d\n", start, hw)
	}
}

// delete-records TOPIC PART OFFSET: DeleteRecords up to OFFSET; prints
// the new low watermark.
func cmdDeleteRecords(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: delete-records TOPIC PART OFFSET")
	}
	s := st(ts)
	topic, part := s.topic(ts, args[0]), atoi32(ts, args[1])
	off, err := strconv.ParseInt(args[2], 10, 64)
	ts.Check(err)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: part, At: off, LeaderEpoch: -1})
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	resps, err := s.adm(ts).DeleteRecords(ctx, os)
	if err == nil {
		err = resps.Error()
	}
	finish(ts, neg, err)
	if err == nil {
		r, _ := resps.Lookup(topic, part)
		fmt.Fprintf(ts.Stdout(), "low-watermark=%d\n", r.LowWatermark)
	}
}

// awaitTopicConfigEverywhere waits until every broker's DescribeConfigs
// of topic answers the values just set. A broker answers from its own
// copy of the topic configs, which follows the metadata asynchronously
// (in Kafka and in Vltava alike), so a describe right after an alter
// could otherwise meet a broker that has not caught up.
func awaitTopicConfigEverywhere(ctx context.Context, cl *kgo.Client, topic string, alters []kadm.AlterConfig) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, res)
	return onEveryBroker(ctx, cl, "topic alter-config: altered, but", "does not answer it yet", func(b *kgo.Broker) (bool, error) {
		resp, err := req.RequestWith(ctx, b)
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			return false, err
		}
		for _, a := range alters {
			if !slices.ContainsFunc(resp.Resources[0].Configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool {
				return c.Name == a.Name && c.Value != nil && a.Value != nil && *c.Value == *a.Value
			}) {
				return false, nil
			}
		}
		return true, nil
	})
}
