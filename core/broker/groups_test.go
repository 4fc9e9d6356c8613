package broker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/config"
)

// groupConfig makes group timings fast enough for tests.
func groupConfig(c *config.Broker) {
	c.GroupInitialRebalanceDelayMs = 50
	c.GroupMinSessionTimeoutMs = 500
	c.GroupConsumerSessionTimeoutMs = 2500
	c.GroupConsumerHeartbeatIntervalMs = 200
	c.OffsetsTopicNumPartitions = 5
}

// ownership records which member owns each partition, from the
// balancers' callbacks, and fails the test if two own one at once.
type ownership struct {
	t      *testing.T
	mu     sync.Mutex
	owner  map[int32]string
	seen   map[int64]bool // partition<<32 | offset
	killed map[string]bool
}

func newOwnership(t *testing.T) *ownership {
	return &ownership{t: t, owner: map[int32]string{}, seen: map[int64]bool{}, killed: map[string]bool{}}
}

func (o *ownership) assigned(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.killed[member] {
		return
	}
	for _, parts := range ps {
		for _, p := range parts {
			if cur, ok := o.owner[p]; ok && cur != member {
				o.t.Errorf("partition %d assigned to %s while %s still owns it", p, member, cur)
			}
			o.owner[p] = member
		}
	}
}

func (o *ownership) revoked(member string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, parts := range ps {
		for _, p := range parts {
			if o.owner[p] == member {
				delete(o.owner, p)
			}
		}
	}
}

// kill forgets a member's partitions: it is gone and will not say so.
func (o *ownership) kill(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.killed[member] = true
	for p, m := range o.owner {
		if m == member {
			delete(o.owner, p)
		}
	}
}

func (o *ownership) consumed(r *kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[int64(r.Partition)<<32|r.Offset] = true
}

// owners returns how many members own partitions and how many
// partitions are owned.
func (o *ownership) owners() (members, partitions int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ms := map[string]bool{}
	for _, m := range o.owner {
		ms[m] = true
	}
	return len(ms), len(o.owner)
}

func (o *ownership) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// killSwitch is a dialer whose connections can all be cut at once, and
// which refuses to dial afterwards: the client is as good as killed.
type killSwitch struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (k *killSwitch) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for _, c := range k.conns {
		c.Close()
	}
}

// groupMember is one consumer of the test group, polling in the
// background until stopped.
type groupMember struct {
	name   string
	cl     *kgo.Client
	ks     *killSwitch
	cancel context.CancelFunc
	done   chan struct{}
}

func startMember(t *testing.T, b *Broker, o *ownership, name, topic, grp string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, ks: &killSwitch{}, done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(b.Addr()), kgo.ClientID(name), kgo.Dialer(m.ks.dial),
		kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(1500 * time.Millisecond), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.RebalanceTimeout(5 * time.Second), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.RetryTimeout(10 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			o.revoked(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.revoked(name, ps) }),
		kgo.AutoCommitMarks(),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				o.consumed(r)
				cl.MarkCommitRecords(r)
			})
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop leaves the group cleanly (committing on revoke) and closes.
func (m *groupMember) stop() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cancel()
	<-m.done
	m.cl.Close()
}

// killMember cuts a member off without a leave; the broker must notice by
// its session timing out.
func (m *groupMember) killMember(o *ownership) {
	o.kill(m.name)
	m.ks.kill()
	m.cancel()
	<-m.done
	go m.cl.Close() // its leave cannot get out; do not wait for it
}

func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 6), Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctxT(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runGroupScenario: six partitions; members join and leave one by one and
// one is killed; every record is consumed, no partition has two owners at
// once, and the committed offsets end at the log end, so a new member
// resumes exactly there.
func runGroupScenario(t *testing.T, opts ...kgo.Opt) {
	b := testBroker(t, groupConfig)
	producer := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic, grp := "orders", "g-"+t.Name()
	createTopic(t, producer, topic, 6, nil)
	o := newOwnership(t)
	total := 0
	spread := func(name string, members int) {
		waitFor(t, name+": partitions spread", func() bool {
			m, p := o.owners()
			return m == members && p == 6
		})
	}
	phase := func(name string) {
		produceN(t, producer, topic, total, 60)
		total += 60
		waitFor(t, name+": every record consumed", func() bool { return o.count() == total })
	}
	m1 := startMember(t, b, o, "m1", topic, grp, opts...)
	phase("m1 alone")
	m2 := startMember(t, b, o, "m2", topic, grp, opts...)
	spread("m2 joined", 2)
	phase("m2 joined")
	m3 := startMember(t, b, o, "m3", topic, grp, opts...)
	spread("m3 joined", 3)
	phase("m3 joined")
	checkGroupType(t, producer, grp, 3)
	m1.stop()
	spread("m1 left", 2)
	phase("m1 left")
	m2.killMember(o)
	spread("m2 killed", 1)
	phase("m2 killed")
	m4 := startMember(t, b, o, "m4", topic, grp, opts...)
	spread("m4 joined", 2)
	phase("m4 joined")
	m3.stop()
	spread("m3 left", 1)
	phase("m3 left")
	m4.stop()

	adm := kadm.NewClient(producer)
	waitFor(t, "commits at the log end", func() bool {
		offs, err := adm.FetchOffsets(ctxT(t), grp)
		if err != nil {
			return false
		}
		for p := int32(0); p < 6; p++ {
			r, ok := offs.Lookup(topic, p)
			if !ok || r.At != int64(total/6) {
				return false
			}
		}
		return true
	})
	// A new member resumes where the group left off: it sees only the
	// records produced after the others stopped.
	o2 := newOwnership(t)
	startMember(t, b, o2, "m5", topic, grp, opts...)
	produceN(t, producer, topic, total, 60)
	waitFor(t, "m5 consumes the new records", func() bool { return o2.count() >= 60 })
	o2.mu.Lock()
	defer o2.mu.Unlock()
	for k := range o2.seen {
		if p, off := int32(k>>32), k&0xffffffff; off < int64(total/6) {
			t.Errorf("m5 re-consumed partition %d offset %d, below the committed %d", p, off, total/6)
		}
	}
}

func TestGroupClassicRange(t *testing.T) {
	runGroupScenario(t, kgo.Balancers(kgo.RangeBalancer()))
}

func TestGroupClassicRoundRobin(t *testing.T) {
	runGroupScenario(t, kgo.Balancers(kgo.RoundRobinBalancer()))
}

func TestGroupClassicCooperativeSticky(t *testing.T) {
	runGroupScenario(t, kgo.Balancers(kgo.CooperativeStickyBalancer()))
}

func TestGroupKIP848Range(t *testing.T) {
	runGroupScenario(t, kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
}

func TestGroupKIP848Uniform(t *testing.T) {
	runGroupScenario(t, kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())
}

// checkGroupType checks through ListGroups and the matching describe API
// that the group runs the protocol the client asked for, with n members.
func checkGroupType(t *testing.T, cl *kgo.Client, grp string, n int) {
	t.Helper()
	ctx := ctxT(t)
	lr := kmsg.NewPtrListGroupsRequest()
	resp, err := lr.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	typ := ""
	for _, g := range resp.Groups {
		if g.Group == grp {
			typ = g.GroupType
		}
	}
	switch typ {
	case "consumer":
		dr := kmsg.NewPtrConsumerGroupDescribeRequest()
		dr.Groups = []string{grp}
		d, err := dr.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(d.Groups[0].Members); got != n {
			t.Fatalf("ConsumerGroupDescribe: %d members, want %d", got, n)
		}
	case "classic":
		dr := kmsg.NewPtrDescribeGroupsRequest()
		dr.Groups = []string{grp}
		d, err := dr.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(d.Groups[0].Members); got != n || d.Groups[0].State != "Stable" {
			t.Fatalf("DescribeGroups: %d members in %s, want %d in Stable", got, d.Groups[0].State, n)
		}
	default:
		t.Fatalf("group %s not listed", grp)
	}
	t.Logf("group %s is a %s group with %d members", grp, typ, n)
}
