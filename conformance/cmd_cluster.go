package conformance

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/conformance/target"
)

// commands is the table of script commands this package adds.
func commands() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"cluster":        cmdCluster,
		"broker":         cmdBroker,
		"leader":         cmdLeader,
		"follower":       cmdFollower,
		"controller":     cmdController,
		"fault":          cmdFault,
		"topic":          cmdTopic,
		"offsets":        cmdOffsets,
		"delete-records": cmdDeleteRecords,
		"produce":        cmdProduce,
		"consume":        cmdConsume,
		"await":          cmdAwait,
		"check":          cmdCheck,
		"raw":            cmdRaw,
		"group":          cmdGroup,
	}
}

// cluster start N [-config key=value]...
func cmdCluster(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "cluster start N [-config key=value]..."
	if len(args) < 2 || args[0] != "start" {
		ts.Fatalf("usage: %s", usage)
	}
	cfg := kvFlag{}
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.Var(cfg, "config", "broker config key=value")
	pos := parse(ts, fs, args, 2, usage)
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 1 {
		ts.Fatalf("cluster start: bad broker count %q", pos[1])
	}
	s := st(ts)
	if s.cluster != nil {
		ts.Fatalf("cluster already started")
	}
	ctx, cancel := ctxFor(60 * time.Second)
	defer cancel()
	c, err := s.suite.Target.Start(ctx, target.Options{Brokers: n, Config: cfg})
	if neg {
		if err == nil {
			c.Close()
			ts.Fatalf("cluster start %d: unexpected success", n)
		}
		return
	}
	ts.Check(err)
	s.cluster = c
	ts.Setenv("BOOTSTRAP", strings.Join(c.Bootstrap(), ","))
	if s.suite.Target.Name() == "external" {
		ts.Setenv("TOPIC_SUFFIX", fmt.Sprintf("-%d", time.Now().UnixNano()))
	}
	// The cluster is up when metadata lists all n brokers.
	awaitCond(ts, 30*time.Second, fmt.Sprintf("%d brokers in metadata", n), func() (bool, string) {
		m, err := metadata(s.client(ts), nil)
		if err != nil {
			return false, err.Error()
		}
		return len(m.Brokers) >= n, fmt.Sprintf("%d brokers", len(m.Brokers))
	})
}

// broker kill|stop|cont|restart ID
func cmdBroker(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: broker kill|stop|cont|restart ID")
	}
	id, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("broker: bad ID %q", args[1])
	}
	c := st(ts).needCluster(ts)
	ops := map[string]func(int32) error{"kill": c.Kill9, "stop": c.Stop, "cont": c.Cont, "restart": c.Restart}
	op := ops[args[0]]
	if op == nil {
		ts.Fatalf("broker: unknown action %q (want kill, stop, cont or restart)", args[0])
	}
	finish(ts, neg, op(int32(id)))
}

// leader TOPIC PART VAR: sets $VAR to the partition's leader node ID.
func cmdLeader(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: leader TOPIC PART VAR")
	}
	s := st(ts)
	part := atoi32(ts, args[1])
	p, err := partitionMeta(s.client(ts), s.topic(ts, args[0]), part)
	ts.Check(err)
	ts.Setenv(args[2], strconv.Itoa(int(p.Leader)))
	ts.Setenv(args[2]+"_EPOCH", strconv.Itoa(int(p.LeaderEpoch)))
	fmt.Fprintf(ts.Stdout(), "leader=%d epoch=%d\n", p.Leader, p.LeaderEpoch)
}

// follower TOPIC PART VAR: sets $VAR to the lowest replica that is not the leader.
func cmdFollower(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: follower TOPIC PART VAR")
	}
	s := st(ts)
	p, err := partitionMeta(s.client(ts), s.topic(ts, args[0]), atoi32(ts, args[1]))
	ts.Check(err)
	for _, r := range slices.Sorted(slices.Values(p.Replicas)) {
		if r != p.Leader {
			ts.Setenv(args[2], strconv.Itoa(int(r)))
			fmt.Fprintf(ts.Stdout(), "follower=%d\n", r)
			return
		}
	}
	ts.Fatalf("follower: %s/%s has no follower (replicas %v)", args[0], args[1], p.Replicas)
}

// controller VAR: sets $VAR to the controller's node ID.
func cmdController(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: controller VAR")
	}
	m, err := metadata(st(ts).client(ts), nil)
	ts.Check(err)
	ts.Setenv(args[0], strconv.Itoa(int(m.ControllerID)))
	fmt.Fprintf(ts.Stdout(), "controller=%d\n", m.ControllerID)
}

// partitionMeta returns a partition's metadata.
func partitionMeta(cl kmsgRequester, topic string, part int32) (*kmsg.MetadataResponseTopicPartition, error) {
	m, err := metadata(cl, []string{topic})
	if err != nil {
		return nil, err
	}
	for _, t := range m.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Partition == part {
				return &t.Partitions[i], nil
			}
		}
	}
	return nil, fmt.Errorf("metadata: no partition %s/%d", topic, part)
}

// fault API-KEY ERROR [-count N] | fault clear: make the target fail requests.
func cmdFault(ts *testscript.TestScript, neg bool, args []string) {
	c := st(ts).needCluster(ts)
	f, ok := c.(target.Faulter)
	if !ok {
		ts.Fatalf("fault: target %s cannot inject faults (guard with [!cap:faults])", st(ts).suite.Target.Name())
	}
	if len(args) == 1 && args[0] == "clear" {
		f.ClearFaults()
		return
	}
	const usage = "fault produce|fetch|API-KEY ERROR_NAME [-count N]"
	fs := flag.NewFlagSet("fault", flag.ContinueOnError)
	count := fs.Int("count", 1, "requests to fail; -1 until cleared")
	pos := parse(ts, fs, args, 2, usage)
	key, ok := map[string]int16{"produce": 0, "fetch": 1, "list-offsets": 2, "metadata": 3}[pos[0]]
	if !ok {
		k, err := strconv.Atoi(pos[0])
		if err != nil {
			ts.Fatalf("usage: %s", usage)
		}
		key = int16(k)
	}
	ts.Check(f.Fault(key, pos[1], *count))
}

func atoi32(ts *testscript.TestScript, s string) int32 {
	n, err := strconv.Atoi(s)
	if err != nil {
		ts.Fatalf("not a number: %q", s)
	}
	return int32(n)
}

// partitionState returns a partition's leader and ISR from fresh metadata.
func partitionState(cl kmsgRequester, topic string, part int32) (int32, []int32, error) {
	m, err := metadata(cl, []string{topic})
	if err != nil {
		return -1, nil, err
	}
	for _, t := range m.Topics {
		if t.ErrorCode != 0 {
			return -1, nil, fmt.Errorf("metadata %s: %s", topic, errName(t.ErrorCode))
		}
		for _, p := range t.Partitions {
			if p.Partition == part {
				if p.ErrorCode != 0 && p.Leader < 0 {
					return -1, p.ISR, fmt.Errorf("metadata %s/%d: %s", topic, part, errName(p.ErrorCode))
				}
				return p.Leader, p.ISR, nil
			}
		}
	}
	return -1, nil, fmt.Errorf("metadata: no partition %s/%d", topic, part)
}

func metadata(cl kmsgRequester, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	return req.RequestWith(ctx, cl)
}
