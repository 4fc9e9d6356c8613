package conformance

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const awaitUsage = `await job NAME | serving | isr TOPIC PART N | leader-changed TOPIC PART OLD | hw TOPIC PART N | log-start TOPIC PART N | lso TOPIC PART N | records TOPIC PART N | config TOPIC KEY VALUE | absent TOPIC | lag-zero GROUP TOPIC | controller-changed OLD  [-timeout D]`

// await CONDITION... [-timeout D]: waits until the condition holds, or
// fails at the timeout with what it last saw. '! await CONDITION' (other
// than job) watches for the whole timeout and fails if the condition
// ever holds; '! await job' expects the job to fail. (testscript's own 'wait'
// waits for exec'd processes, hence the name.)
func cmdAwait(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: %s", awaitUsage)
	}
	npos := map[string]int{"job": 2, "serving": 1, "isr": 4, "leader-changed": 4, "hw": 4, "log-start": 4, "lso": 4, "records": 4, "config": 4, "absent": 2, "lag-zero": 3, "controller-changed": 2}[args[0]]
	if npos == 0 {
		ts.Fatalf("await: unknown condition %q; usage: %s", args[0], awaitUsage)
	}
	fs := flag.NewFlagSet("await", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after")
	pos := parse(ts, fs, args, npos, awaitUsage)
	s := st(ts)
	if pos[0] == "job" {
		awaitJob(ts, neg, pos[1], *timeout)
		return
	}
	var cond func() (bool, string)
	switch pos[0] {
	case "serving":
		cond = func() (bool, string) {
			req := kmsg.NewPtrApiVersionsRequest()
			ctx, cancel := ctxFor(5 * time.Second)
			defer cancel()
			_, err := req.RequestWith(ctx, s.client(ts))
			if err == nil {
				_, err = metadata(s.client(ts), nil)
			}
			return err == nil, fmt.Sprint(err)
		}
	case "isr", "leader-changed":
		topic, part, want := s.topic(ts, pos[1]), atoi32(ts, pos[2]), atoi32(ts, pos[3])
		cond = func() (bool, string) {
			leader, isr, err := partitionState(s.client(ts), topic, part)
			if err != nil {
				return false, err.Error()
			}
			got := fmt.Sprintf("leader %d isr %v", leader, isr)
			if pos[0] == "isr" {
				return len(isr) == int(want), got
			}
			return leader >= 0 && leader != want, got
		}
	case "hw", "log-start", "lso":
		topic, part := s.topic(ts, pos[1]), atoi32(ts, pos[2])
		want, err := strconv.ParseInt(pos[3], 10, 64)
		ts.Check(err)
		iso := int8(0)
		if pos[0] == "lso" {
			iso = 1
		}
		cond = func() (bool, string) {
			start, hw, err := offsetsOf(s.client(ts), topic, part, iso)
			if err != nil {
				return false, err.Error()
			}
			got := fmt.Sprintf("log-start %d high-watermark %d", start, hw)
			if pos[0] == "lso" {
				return hw >= want, fmt.Sprintf("last stable offset %d", hw)
			}
			if pos[0] == "hw" {
				return hw >= want, got
			}
			return start >= want, got
		}
	case "absent":
		// No broker lists the topic any more (deletion reaches the
		// brokers asynchronously, in Kafka too).
		topic := s.topic(ts, pos[1])
		cond = func() (bool, string) {
			for i, b := range s.client(ts).DiscoveredBrokers() {
				m, err := metadata(b, []string{topic})
				if err != nil {
					return false, err.Error()
				}
				for _, t := range m.Topics {
					if t.ErrorCode != kerr.UnknownTopicOrPartition.Code {
						return false, fmt.Sprintf("discovered broker #%d: %s: %s, %d partitions", i+1, topic, errName(t.ErrorCode), len(t.Partitions))
					}
				}
			}
			return true, ""
		}
	case "config":
		// Every broker describes topic config KEY as VALUE: config
		// changes reach the brokers asynchronously (in Kafka too).
		topic, key, want := s.topic(ts, pos[1]), pos[2], pos[3]
		cond = func() (bool, string) {
			for i, b := range s.client(ts).DiscoveredBrokers() {
				req := kmsg.NewPtrDescribeConfigsRequest()
				r := kmsg.NewDescribeConfigsRequestResource()
				r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
				req.Resources = append(req.Resources, r)
				ctx, cancel := ctxFor(5 * time.Second)
				resp, err := b.RetriableRequest(ctx, req)
				cancel()
				if err != nil {
					return false, err.Error()
				}
				for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
					for _, c := range res.Configs {
						if c.Name == key && (c.Value == nil || *c.Value != want) {
							return false, fmt.Sprintf("discovered broker #%d: %s=%v", i+1, key, c.Value)
						}
					}
				}
			}
			return true, ""
		}
	case "records":
		// The partition holds at most N records from its log start to
		// its high watermark (compaction or deletion removed the rest).
		topic, part := s.topic(ts, pos[1]), atoi32(ts, pos[2])
		want, err := strconv.Atoi(pos[3])
		ts.Check(err)
		cond = func() (bool, string) {
			start, hw, err := offsetsOf(s.client(ts), topic, part, 0)
			if err != nil {
				return false, err.Error()
			}
			recs, err := readPartition(s, ts, topic, part, 0, start, hw, "")
			if err != nil {
				return false, err.Error()
			}
			return len(recs) <= want, fmt.Sprintf("%d records in [%d, %d)", len(recs), start, hw)
		}
	case "controller-changed":
		old := atoi32(ts, pos[1])
		cond = func() (bool, string) {
			m, err := metadata(s.client(ts), nil)
			if err != nil {
				return false, err.Error()
			}
			return m.ControllerID >= 0 && m.ControllerID != old, fmt.Sprintf("controller %d", m.ControllerID)
		}
	case "lag-zero":
		group, topic := s.group(pos[1]), s.topic(ts, pos[2])
		cond = func() (bool, string) { return lagZero(s, ts, group, topic) }
	}
	if neg {
		awaitNever(ts, *timeout, pos[0], cond)
		return
	}
	awaitCond(ts, *timeout, pos[0], cond)
}

// awaitNever is '! await COND': it polls cond every 100ms for the whole
// timeout and fails as soon as it holds (say, a partition that must stay
// leaderless gets a leader).
func awaitNever(ts *testscript.TestScript, timeout time.Duration, what string, cond func() (bool, string)) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok, last := cond(); ok {
			ts.Fatalf("! await %s: it happened: %s", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitCond polls cond every 100ms until it holds or timeout passes.
func awaitCond(ts *testscript.TestScript, timeout time.Duration, what string, cond func() (bool, string)) {
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("await %s: not within %v; last: %s", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func awaitJob(ts *testscript.TestScript, neg bool, name string, timeout time.Duration) {
	s := st(ts)
	s.mu.Lock()
	j := s.jobs[name]
	s.mu.Unlock()
	if j == nil {
		ts.Fatalf("await job: no job %q", name)
	}
	select {
	case <-j.done:
	case <-time.After(timeout):
		ts.Fatalf("await job %s: still running after %v", name, timeout)
	}
	s.mu.Lock()
	delete(s.jobs, name)
	s.mu.Unlock()
	fmt.Fprint(ts.Stdout(), j.out)
	finish(ts, neg, j.err)
}

// lagZero reports whether group's committed offsets equal the high
// watermarks of every partition of topic.
func lagZero(s *state, ts *testscript.TestScript, group, topic string) (bool, string) {
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	adm := s.adm(ts)
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		return false, err.Error()
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, err.Error()
	}
	var lagging []string
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if !ok || c.At < o.Offset {
			lagging = append(lagging, fmt.Sprintf("%d: committed %d end %d", o.Partition, c.At, o.Offset))
		}
	})
	slices.Sort(lagging)
	return len(lagging) == 0, fmt.Sprint(lagging)
}
