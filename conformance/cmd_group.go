package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const groupUsage = `group member start G TOPIC NAME [-instance ID] [-balancer range|cooperative-sticky|server]
group member stop|kill|bounce NAME
group settled NAME... [-timeout D]
group events NAME
group check
group raw join G TOPIC NAME
group raw heartbeat G NAME [-member ID] [-generation N] [-expect ok|ERR]
group raw commit G NAME|- TOPIC PART OFFSET [-member ID] [-generation N] [-expect ok|ERR]
group raw leave G NAME [-expect ok|ERR]
group raw848 join G TOPIC NAME
group raw848 heartbeat|leave G NAME [-member ID] [-epoch N] [-expect ok|ERR]
group raw848 commit G NAME TOPIC PART OFFSET [-member ID] [-epoch N] [-expect ok|ERR]`

// groups is a script's group members: real franz-go clients run in
// process, and raw members made of hand-built requests.
type groups struct {
	mu      sync.Mutex
	members map[string]*gmember
	raw     map[string]rawMember
	events  []gevent // every ownership change, in time order
}

type rawMember struct {
	group, id string
	gen       int32
}

// gevent is one ownership change of one member.
type gevent struct {
	member string
	owns   bool // assigned (true) or revoked/lost/killed (false)
	parts  []int32
	at     time.Time
}

// gmember is one franz-go member.
type gmember struct {
	name, group, topic, instance, balancer string
	cl                                     *kgo.Client
	cancel                                 context.CancelFunc
	done                                   chan struct{} // closed when the poll loop returns
	dead                                   chan struct{} // closed on kill: dials fail from then on
	conns                                  []net.Conn    // every connection dialed, closed on kill
	owned                                  map[int32]bool
	assigned, revoked, lost                int // non-empty callbacks
}

var groupsByState sync.Map // *state → *groups

func groupsOf(ts *testscript.TestScript) *groups {
	s := st(ts)
	g, loaded := groupsByState.LoadOrStore(s, &groups{members: map[string]*gmember{}, raw: map[string]rawMember{}})
	if !loaded {
		ts.Defer(func() { g.(*groups).closeAll(); groupsByState.Delete(s) })
	}
	return g.(*groups)
}

func cmdGroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("group: state expected errors with -expect instead of !")
	}
	if len(args) == 0 {
		ts.Fatalf("usage:\n%s", groupUsage)
	}
	g := groupsOf(ts)
	switch args[0] {
	case "member":
		if len(args) < 2 {
			ts.Fatalf("usage:\n%s", groupUsage)
		}
		g.member(ts, args[1], args[2:])
	case "settled":
		g.settled(ts, args[1:])
	case "events":
		if len(args) != 2 {
			ts.Fatalf("usage: group events NAME")
		}
		m := g.get(ts, args[1])
		g.mu.Lock()
		fmt.Fprintf(ts.Stdout(), "%s: assigned=%d revoked=%d lost=%d\n", m.name, m.assigned, m.revoked, m.lost)
		g.mu.Unlock()
	case "check":
		if err := g.checkExclusive(); err != nil {
			ts.Fatalf("%v", err)
		}
		fmt.Fprintf(ts.Stdout(), "exclusive: %d ownership changes, never two owners\n", len(g.events))
	case "raw":
		g.rawCmd(ts, args[1:])
	case "raw848":
		g.raw848(ts, args[1:])
	default:
		ts.Fatalf("usage:\n%s", groupUsage)
	}
}

func (g *groups) get(ts *testscript.TestScript, name string) *gmember {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[name]
	if m == nil {
		ts.Fatalf("group: no member %q", name)
	}
	return m
}

func (g *groups) member(ts *testscript.TestScript, verb string, args []string) {
	switch verb {
	case "start":
		fs := flag.NewFlagSet("group member start", flag.ContinueOnError)
		inst := fs.String("instance", "", "group.instance.id (static membership)")
		bal := fs.String("balancer", "range", "range, cooperative-sticky or server (KIP-848)")
		pos := parse(ts, fs, args, 3, groupUsage)
		m := &gmember{name: pos[2], group: st(ts).group(pos[0]), topic: st(ts).topic(ts, pos[1]), instance: *inst, balancer: *bal}
		g.mu.Lock()
		if g.members[m.name] != nil && g.members[m.name].cl != nil {
			g.mu.Unlock()
			ts.Fatalf("group: member %q is running", m.name)
		}
		g.members[m.name] = m
		g.mu.Unlock()
		if err := g.start(ts, m); err != nil {
			ts.Fatalf("%v", err)
		}
	case "stop", "kill", "bounce":
		if len(args) != 1 {
			ts.Fatalf("usage: group member %s NAME", verb)
		}
		m := g.get(ts, args[0])
		if verb == "kill" {
			close(m.dead) // the member can no longer reach the cluster
			g.mu.Lock()
			for _, c := range m.conns {
				c.Close()
			}
			g.mu.Unlock()
			g.own(m, false, nil, time.Now())
		}
		g.stop(m, verb == "kill")
		if verb == "bounce" {
			if err := g.start(ts, m); err != nil {
				ts.Fatalf("%v", err)
			}
		}
	default:
		ts.Fatalf("usage:\n%s", groupUsage)
	}
}

// start runs m's client and poll loop: it commits after each poll.
func (g *groups) start(ts *testscript.TestScript, m *gmember) error {
	m.dead, m.done, m.owned, m.conns = make(chan struct{}), make(chan struct{}), map[int32]bool{}, nil
	dead := m.dead
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	cb := func(owns bool, counter *int) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if len(ps[m.topic]) == 0 {
				return
			}
			select {
			case <-dead:
				return // a dead member's callbacks are not events
			default:
			}
			g.mu.Lock()
			*counter++
			g.mu.Unlock()
			g.own(m, owns, ps[m.topic], time.Now())
		}
	}
	opts := append(st(ts).clientOpts(st(ts).needCluster(ts), ""),
		kgo.ClientID(m.name), kgo.ConsumerGroup(m.group), kgo.ConsumeTopics(m.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.OnPartitionsAssigned(cb(true, &m.assigned)), kgo.OnPartitionsRevoked(cb(false, &m.revoked)),
		kgo.OnPartitionsLost(cb(false, &m.lost)),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			select {
			case <-dead:
				return nil, errors.New("member killed")
			default:
			}
			c, err := dialer.DialContext(ctx, network, host)
			if err == nil {
				g.mu.Lock()
				m.conns = append(m.conns, c)
				g.mu.Unlock()
			}
			return c, err
		}))
	if m.instance != "" {
		opts = append(opts, kgo.InstanceID(m.instance))
	}
	switch m.balancer {
	case "range":
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	case "cooperative-sticky":
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	case "server":
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	default:
		return fmt.Errorf("group: unknown balancer %q", m.balancer)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cl, m.cancel = cl, cancel
	go func() { // owned by m: stop cancels and waits on done
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if recs := fs.Records(); len(recs) > 0 {
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_ = cl.CommitRecords(cctx, recs...)
				ccancel()
			}
			cl.AllowRebalance()
		}
	}()
	return nil
}

// stop ends m's poll loop and closes its client. A killed member's
// connections are already refused, so it cannot leave the group.
func (g *groups) stop(m *gmember, killed bool) {
	if m.cl == nil {
		return
	}
	m.cancel()
	<-m.done
	if killed {
		// Close would try to leave; bound it, the dials fail anyway.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = m.cl.LeaveGroupContext(ctx)
		cancel()
	}
	m.cl.Close()
	if !killed {
		g.own(m, false, nil, time.Now())
	}
	m.cl = nil
}

func (g *groups) closeAll() {
	g.mu.Lock()
	ms := slices.Collect(func(yield func(*gmember) bool) {
		for _, m := range g.members {
			if !yield(m) {
				return
			}
		}
	})
	g.mu.Unlock()
	for _, m := range ms {
		g.stop(m, false)
	}
}

// own records an ownership change; parts nil with owns false means the
// member gave up everything (stopped or killed).
func (g *groups) own(m *gmember, owns bool, parts []int32, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if parts == nil && !owns {
		for p := range m.owned {
			parts = append(parts, p)
		}
		slices.Sort(parts)
	}
	for _, p := range parts {
		if owns {
			m.owned[p] = true
		} else {
			delete(m.owned, p)
		}
	}
	g.events = append(g.events, gevent{member: m.name, owns: owns, parts: slices.Clone(parts), at: at})
}

// settled waits until the named members (running) own all partitions of
// their topic between them, one owner each.
func (g *groups) settled(ts *testscript.TestScript, args []string) {
	fs := flag.NewFlagSet("group settled", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 60*time.Second, "give up after")
	if err := fs.Parse(reorder(args)); err != nil || fs.NArg() == 0 {
		ts.Fatalf("usage: group settled NAME... [-timeout D]")
	}
	names := fs.Args()
	first := g.get(ts, names[0])
	m, err := metadata(st(ts).client(ts), []string{first.topic})
	if err != nil || len(m.Topics) != 1 {
		ts.Fatalf("group settled: metadata: %v", err)
	}
	n := len(m.Topics[0].Partitions)
	deadline := time.Now().Add(*timeout)
	for {
		owners, ok := g.owners(names, n)
		if ok {
			fmt.Fprintf(ts.Stdout(), "settled: %s\n", owners)
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("group settled: not settled after %v: %s", *timeout, owners)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// owners describes who owns what, and whether exactly names own all n
// partitions once each.
func (g *groups) owners(names []string, n int) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	count := map[int32]int{}
	var b strings.Builder
	ok := true
	for _, name := range names {
		m := g.members[name]
		if m == nil || m.cl == nil || len(m.owned) == 0 {
			ok = false
			continue
		}
		ps := slices.Sorted(func(yield func(int32) bool) {
			for p := range m.owned {
				if !yield(p) {
					return
				}
			}
		})
		fmt.Fprintf(&b, "%s=%v ", name, ps)
		for _, p := range ps {
			count[int32(p)]++
		}
	}
	for _, m := range g.members {
		if !slices.Contains(names, m.name) && len(m.owned) > 0 {
			ok = false
		}
	}
	for p := range int32(n) {
		if count[p] != 1 {
			ok = false
		}
	}
	return strings.TrimSpace(b.String()), ok && len(count) == n
}

// checkExclusive replays the ownership changes in time order: a
// partition assigned while another member still owns it is an error.
func (g *groups) checkExclusive() error {
	g.mu.Lock()
	evs := slices.Clone(g.events)
	g.mu.Unlock()
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	owner := map[int32]string{}
	var errs []error
	for _, e := range evs {
		for _, p := range e.parts {
			switch {
			case !e.owns && owner[p] == e.member:
				delete(owner, p)
			case e.owns && owner[p] != "" && owner[p] != e.member:
				errs = append(errs, fmt.Errorf("group: partition %d assigned to %s at %s while %s owned it", p, e.member, e.at.Format(time.StampMicro), owner[p]))
			case e.owns:
				owner[p] = e.member
			}
		}
	}
	return errors.Join(errs...)
}

// reorder puts flags before positional arguments for flag.Parse.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags = append(flags, args[i])
			if !strings.Contains(args[i], "=") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, args[i])
	}
	return append(flags, pos...)
}

// rawCmd: hand-built JoinGroup/SyncGroup, Heartbeat and OffsetCommit, for
// fencing that a well-behaved client never provokes.
func (g *groups) rawCmd(ts *testscript.TestScript, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage:\n%s", groupUsage)
	}
	cl := st(ts).client(ts)
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	fs := flag.NewFlagSet("group raw", flag.ContinueOnError)
	memberID := fs.String("member", "", "member ID to send instead of the member's")
	gen := fs.Int("generation", -100, "generation to send instead of the member's")
	expect := fs.String("expect", "ok", "ok or the expected error name")
	switch args[0] {
	case "join":
		pos := parse(ts, fs, args[1:], 3, groupUsage)
		rm, err := rawJoin(ctx, cl, st(ts).group(pos[0]), st(ts).topic(ts, pos[1]))
		if err != nil {
			ts.Fatalf("group raw join: %v", err)
		}
		g.mu.Lock()
		g.raw[pos[2]] = rm
		g.mu.Unlock()
		fmt.Fprintf(ts.Stdout(), "joined: generation=%d\n", rm.gen)
		return
	case "leave":
		pos := parse(ts, fs, args[1:], 2, groupUsage)
		g.mu.Lock()
		rm, ok := g.raw[pos[1]]
		g.mu.Unlock()
		if !ok {
			ts.Fatalf("group raw: no raw member %q (group raw join first)", pos[1])
		}
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group, req.MemberID = rm.group, rm.id
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = rm.id
		req.Members = append(req.Members, m)
		resp, err := req.RequestWith(ctx, coord(cl))
		ts.Check(err)
		code := resp.ErrorCode
		for _, m := range resp.Members {
			if code == 0 {
				code = m.ErrorCode
			}
		}
		got := "ok"
		if code != 0 {
			got = errName(code)
		}
		fmt.Fprintf(ts.Stdout(), "leave: %s\n", got)
		if !slices.Contains(strings.Split(*expect, "|"), got) {
			ts.Fatalf("group raw leave: got %s, want %s", got, *expect)
		}
		return
	case "heartbeat", "commit":
	default:
		ts.Fatalf("usage:\n%s", groupUsage)
	}
	npos := 2
	if args[0] == "commit" {
		npos = 5
	}
	pos := parse(ts, fs, args[1:], npos, groupUsage)
	g.mu.Lock()
	rm, ok := g.raw[pos[1]]
	g.mu.Unlock()
	if pos[1] == "-" { // no member: a simple (standalone) consumer's commit
		rm, ok = rawMember{group: st(ts).group(pos[0]), gen: -1}, true
	}
	if !ok {
		ts.Fatalf("group raw: no raw member %q (group raw join first)", pos[1])
	}
	if *memberID != "" {
		rm.id = *memberID
	}
	if *gen != -100 {
		rm.gen = int32(*gen)
	}
	var code int16
	var err error
	if args[0] == "heartbeat" {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = rm.group, rm.id, rm.gen
		var resp *kmsg.HeartbeatResponse
		if resp, err = req.RequestWith(ctx, coord(cl)); err == nil {
			code = resp.ErrorCode
		}
	} else {
		code, err = rawCommit(ctx, cl, rm.group, rm, st(ts).topic(ts, pos[2]), pos[3], pos[4])
	}
	if err != nil {
		ts.Fatalf("group raw %s: %v", args[0], err)
	}
	got := "ok"
	if code != 0 {
		got = errName(code)
	}
	fmt.Fprintf(ts.Stdout(), "%s: %s\n", args[0], got)
	if !slices.Contains(strings.Split(*expect, "|"), got) {
		ts.Fatalf("group raw %s: got %s, want %s", args[0], got, *expect)
	}
}

// rawJoin makes a one-member classic group: JoinGroup (again with the
// member ID if MEMBER_ID_REQUIRED), then SyncGroup assigning the leader
// every partition of topic.
func rawJoin(ctx context.Context, cl *kgo.Client, group, topic string) (rawMember, error) {
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{topic}
	rm := rawMember{group: group}
	var join *kmsg.JoinGroupResponse
	for range 3 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, rm.id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
		resp, err := req.RequestWith(ctx, coord(cl))
		if err != nil {
			return rm, err
		}
		rm.id = resp.MemberID
		if resp.ErrorCode == 0 {
			join = resp
			break
		}
		if errName(resp.ErrorCode) != "MEMBER_ID_REQUIRED" {
			return rm, fmt.Errorf("join: %s", errName(resp.ErrorCode))
		}
	}
	if join == nil {
		return rm, errors.New("join: MEMBER_ID_REQUIRED three times")
	}
	rm.gen = join.Generation
	m, err := metadata(cl, []string{topic})
	if err != nil || len(m.Topics) != 1 {
		return rm, fmt.Errorf("metadata: %v", err)
	}
	as := kmsg.NewConsumerMemberAssignment()
	at := kmsg.ConsumerMemberAssignmentTopic{Topic: topic}
	for _, p := range m.Topics[0].Partitions {
		at.Partitions = append(at.Partitions, p.Partition)
	}
	as.Topics = []kmsg.ConsumerMemberAssignmentTopic{at}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = group, rm.id, rm.gen
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if join.LeaderID == rm.id {
		sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: rm.id, MemberAssignment: as.AppendTo(nil)}}
	}
	resp, err := sync.RequestWith(ctx, coord(cl))
	if err != nil {
		return rm, err
	}
	if resp.ErrorCode != 0 {
		return rm, fmt.Errorf("sync: %s", errName(resp.ErrorCode))
	}
	return rm, nil
}

func rawCommit(ctx context.Context, cl *kgo.Client, group string, rm rawMember, topic, part, offset string) (int16, error) {
	var p int32
	var o int64
	if _, err := fmt.Sscan(part, &p); err != nil {
		return 0, fmt.Errorf("bad partition %q", part)
	}
	if _, err := fmt.Sscan(offset, &o); err != nil {
		return 0, fmt.Errorf("bad offset %q", offset)
	}
	m, err := metadata(cl, []string{topic})
	if err != nil || len(m.Topics) != 1 {
		return 0, fmt.Errorf("metadata: %v", err)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, rm.id, rm.gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, m.Topics[0].TopicID
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = p, o
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, coord(cl))
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("commit: malformed response")
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}
