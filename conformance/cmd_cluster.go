package conformance

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/conformance/target"
)

const clusterUsage = "cluster start N [-config key=value]... [-require key=value|key<=value]... [-sasl [-user NAME:PASSWORD]... [-acls]]"

// cluster start N ...: starts N brokers (an external target starts
// nothing), waits until metadata lists them, and sets $BOOTSTRAP, $NODES
// (the node IDs, ascending) and $NODE_1..$NODE_N (the i-th lowest node
// ID): scripts address brokers by these, never by assumed numbers.
// -config keys tune the brokers where the target can set them and are
// hints elsewhere (ignored on an external target); -require keys are
// preconditions: set where the target can, and otherwise checked with
// DescribeConfigs on every broker, skipping the scenario with the
// reason when the running cluster does not satisfy them.
func cmdCluster(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || args[0] != "start" {
		ts.Fatalf("usage: %s", clusterUsage)
	}
	cfg, req, userList := kvFlag{}, kvFlag{}, kvList{}
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.Var(cfg, "config", "broker config key=value (a hint where the target cannot set it)")
	fs.Var(req, "require", "broker config key=value or key<=value the scenario needs")
	sasl := fs.Bool("sasl", false, "require SASL/PLAIN; the suite logs in as the superuser")
	acls := fs.Bool("acls", false, "enable ACL authorization (with -sasl)")
	fs.Var(&userList, "user", "SASL user NAME:PASSWORD (with -sasl)")
	pos := parse(ts, fs, args, 2, clusterUsage)
	users := map[string]string{}
	for _, u := range userList {
		name, pass, ok := strings.Cut(u, ":")
		if !ok || name == "" {
			ts.Fatalf("cluster start: -user wants NAME:PASSWORD, got %q", u)
		}
		users[name] = pass
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 1 {
		ts.Fatalf("cluster start: bad broker count %q", pos[1])
	}
	s := st(ts)
	if s.cluster != nil {
		ts.Fatalf("cluster already started")
	}
	settable := s.suite.Caps["brokerconfig"]
	all := map[string]string{}
	for k, v := range cfg {
		all[k] = v
	}
	for k, v := range req {
		if strings.HasSuffix(k, "<") { // key<=value: set the bound
			k = strings.TrimSuffix(k, "<")
		}
		all[k] = v
	}
	if !settable && len(cfg) > 0 {
		ts.Logf("target %s cannot set broker configs: -config %v are hints, not applied", s.suite.Target.Name(), cfg)
	}
	o := target.Options{Brokers: n, SASL: *sasl, ACLs: *acls, Users: users}
	if n == 1 && s.suite.MinBrokers > 1 {
		o.Brokers = s.suite.MinBrokers // a single-broker scenario, run on a bigger cluster
	}
	if settable {
		o.Config = all
	}
	ctx, cancel := ctxFor(60 * time.Second)
	defer cancel()
	c, err := s.suite.Target.Start(ctx, o)
	if neg {
		if err == nil {
			c.Close()
			ts.Fatalf("cluster start %d: unexpected success", n)
		}
		return
	}
	ts.Check(err)
	s.cluster, s.sasl, s.users = c, *sasl, users
	ts.Setenv("BOOTSTRAP", strings.Join(c.Bootstrap(), ","))
	// The cluster is up when metadata lists all n brokers.
	var ids []int32
	if s.suite.Target.Name() == "external" {
		m, err := metadata(s.client(ts), nil)
		ts.Check(err)
		if len(m.Brokers) < n {
			s.skip(fmt.Sprintf("precondition: needs %d brokers; the cluster has %d", n, len(m.Brokers)))
		}
	}
	// Each broker starts its plugin processes and joins the raft quorum
	// before it registers: on a heavily loaded machine that takes long,
	// so the wait is generous (a broker that exited fails Start instead).
	awaitCond(ts, 120*time.Second, fmt.Sprintf("%d brokers in metadata", o.Brokers), func() (bool, string) {
		m, err := metadata(s.client(ts), nil)
		if err != nil {
			return false, err.Error()
		}
		ids = ids[:0]
		for _, b := range m.Brokers {
			ids = append(ids, b.NodeID)
		}
		return len(m.Brokers) >= o.Brokers, fmt.Sprintf("%d brokers %v", len(m.Brokers), ids)
	})
	slices.Sort(ids)
	var names []string
	for i, id := range ids {
		ts.Setenv(fmt.Sprintf("NODE_%d", i+1), strconv.Itoa(int(id)))
		names = append(names, strconv.Itoa(int(id)))
	}
	ts.Setenv("NODES", strings.Join(names, " "))
	if !settable && len(req) > 0 {
		checkRequired(ts, s, ids, req)
	}
}

// checkRequired skips the scenario unless every broker's config
// satisfies req (key=value: equal; key<=value: numerically at most).
func checkRequired(ts *testscript.TestScript, s *state, ids []int32, req kvFlag) {
	for _, k := range slices.Sorted(maps.Keys(req)) {
		want := req[k]
		key, atMost := strings.CutSuffix(k, "<")
		op := "="
		if atMost {
			op = "<="
		}
		for _, id := range ids {
			got, err := brokerConfig(s.client(ts), id, key)
			if err != nil {
				s.skip(fmt.Sprintf("precondition: needs broker config %s%s%s; DescribeConfigs on broker %d: %v", key, op, want, id, err))
			}
			ok := got == want
			if atMost {
				g, err1 := strconv.ParseFloat(got, 64)
				w, err2 := strconv.ParseFloat(want, 64)
				ok = err1 == nil && err2 == nil && g <= w
			}
			if !ok {
				s.skip(fmt.Sprintf("precondition: needs broker config %s%s%s; broker %d has %s=%s (set it on the cluster to run this scenario)", key, op, want, id, key, got))
			}
		}
	}
}

// brokerConfig returns broker node's value of key from DescribeConfigs.
func brokerConfig(cl *kgo.Client, node int32, key string) (string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(node)), []string{key}
	req.Resources = append(req.Resources, r)
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	resp, err := cl.Broker(int(node)).RetriableRequest(ctx, req)
	if err != nil {
		return "", err
	}
	for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if res.ErrorCode != 0 {
			return "", fmt.Errorf("%s", errName(res.ErrorCode))
		}
		for _, c := range res.Configs {
			if c.Name == key && c.Value != nil {
				return *c.Value, nil
			}
		}
	}
	return "", fmt.Errorf("%s not described", key)
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
