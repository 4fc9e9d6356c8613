package acceptance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupDaemonConfig makes group changes quick: no initial rebalance
// delay, and sessions short enough that a killed member is noticed in
// seconds.
var groupDaemonConfig = map[string]string{
	"group.initial.rebalance.delay.ms":     "0",
	"group.min.session.timeout.ms":         "1000",
	"group.consumer.session.timeout.ms":    "3000",
	"group.consumer.heartbeat.interval.ms": "300",
	"offsets.topic.num.partitions":         "4",
}

// memberProc is one member process and what it reported.
type memberProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once stdout is drained and the process reaped

	mu     sync.Mutex
	events []memberEvent
	owned  map[int32]bool
	// end is when the member stopped owning anything: its exit, or the
	// moment it was killed (Unix ns).
	end    int64
	killed bool
}

// groupRun is a set of member processes of one group on one topic.
type groupRun struct {
	t       *testing.T
	spec    memberSpec
	members []*memberProc
}

// start runs a new member process: the test binary with envMember set.
func (g *groupRun) start(name string) *memberProc {
	t := g.t
	t.Helper()
	spec := g.spec
	spec.Name = name
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envMember+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &memberProc{name: name, cmd: cmd, done: make(chan struct{}), owned: map[int32]bool{}}
	g.members = append(g.members, m)
	go func() { // owned by m: done closes when the process is reaped
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e memberEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			m.note(e)
		}
		_ = cmd.Wait()
		m.mu.Lock()
		if m.end == 0 {
			m.end = time.Now().UnixNano()
		}
		m.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-m.done
	})
	return m
}

func (m *memberProc) note(e memberEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
	switch e.Ev {
	case "assigned":
		for _, p := range e.Ps {
			m.owned[p] = true
		}
	case "revoked", "lost":
		for _, p := range e.Ps {
			delete(m.owned, p)
		}
	}
}

// stop ends a member with SIGTERM: it leaves the group cleanly.
func (g *groupRun) stop(m *memberProc) {
	g.t.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		g.t.Fatalf("member %s did not exit after SIGTERM", m.name)
	}
}

// kill9 ends a member with SIGKILL; its ownership ends now.
func (g *groupRun) kill9(m *memberProc) {
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	m.mu.Lock()
	m.end, m.killed = time.Now().UnixNano(), true
	m.mu.Unlock()
	<-m.done
}

// owners returns which live member owns each partition, as they reported.
func (g *groupRun) owners() map[int32][]string {
	out := map[int32][]string{}
	for _, m := range g.members {
		m.mu.Lock()
		if m.end == 0 {
			for p := range m.owned {
				out[p] = append(out[p], m.name)
			}
		}
		m.mu.Unlock()
	}
	return out
}

// consumed is every (partition, offset) any member reported.
func (g *groupRun) consumed() map[[2]int64]bool {
	out := map[[2]int64]bool{}
	for _, m := range g.members {
		m.mu.Lock()
		for _, e := range m.events {
			if e.Ev == "rec" {
				out[[2]int64{int64(e.P), e.O}] = true
			}
		}
		m.mu.Unlock()
	}
	return out
}

// waitOwners waits until exactly the live members named own all
// partitions, one owner each.
func (g *groupRun) waitOwners(partitions int32, names ...string) {
	g.t.Helper()
	ok := waitFor(60*time.Second, func() bool {
		own := g.owners()
		seen := map[string]bool{}
		for p := range partitions {
			if len(own[p]) != 1 {
				return false
			}
			seen[own[p][0]] = true
		}
		return len(own) == int(partitions) && len(seen) == len(names) && slices.ContainsFunc(names, func(n string) bool { return seen[n] })
	})
	if !ok {
		g.t.Fatalf("partitions never settled on %v: owners %v", names, g.owners())
	}
}

// waitConsumed waits until members reported every offset below ends.
func (g *groupRun) waitConsumed(ends map[int32]int64) {
	g.t.Helper()
	missing := func() []string {
		got := g.consumed()
		var miss []string
		for p, end := range ends {
			for o := range end {
				if !got[[2]int64{int64(p), o}] {
					miss = append(miss, fmt.Sprintf("%d@%d", p, o))
					break
				}
			}
		}
		return miss
	}
	if !waitFor(60*time.Second, func() bool { return len(missing()) == 0 }) {
		g.t.Fatalf("records never consumed (first missing per partition): %v; owners %v", missing(), g.owners())
	}
}

// interval is one member's ownership of one partition, [from, to) in
// Unix ns.
type interval struct {
	member   string
	from, to int64
}

// ownership rebuilds each member's ownership intervals from its events.
func (g *groupRun) ownership() map[int32][]interval {
	out := map[int32][]interval{}
	for _, m := range g.members {
		m.mu.Lock()
		since := map[int32]int64{}
		for _, e := range m.events {
			switch e.Ev {
			case "assigned":
				for _, p := range e.Ps {
					if _, ok := since[p]; !ok {
						since[p] = e.T
					}
				}
			case "revoked", "lost":
				for _, p := range e.Ps {
					if from, ok := since[p]; ok {
						out[p] = append(out[p], interval{m.name, from, e.T})
						delete(since, p)
					}
				}
			}
		}
		for p, from := range since {
			out[p] = append(out[p], interval{m.name, from, m.end})
		}
		m.mu.Unlock()
	}
	return out
}

// checkExclusive fails the test if two members owned a partition at the
// same time, or a member reported a record of a partition it did not own.
func (g *groupRun) checkExclusive() {
	t := g.t
	t.Helper()
	own := g.ownership()
	for p, ivs := range own {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].from < ivs[j].from })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].from < ivs[i-1].to {
				t.Errorf("partition %d owned by %s and %s at once (%s from %d until %d; %s from %d)", p,
					ivs[i-1].member, ivs[i].member, ivs[i-1].member, ivs[i-1].from, ivs[i-1].to, ivs[i].member, ivs[i].from)
			}
		}
	}
	for _, m := range g.members {
		for _, e := range m.events {
			if e.Ev != "rec" {
				continue
			}
			if !slices.ContainsFunc(own[e.P], func(iv interval) bool { return iv.member == m.name && iv.from <= e.T && e.T <= iv.to }) {
				t.Errorf("%s consumed %d@%d while not owning partition %d", m.name, e.P, e.O, e.P)
			}
		}
	}
}

// recRun is a run of records of one partition consumed by one member:
// offsets first..last, the last reported at time end.
type recRun struct {
	m           *memberProc
	first, last int64
	end         int64
}

// checkResume checks that consumption of each partition resumes where it
// left off: within a member's run offsets follow one another, and the
// next run starts right after the last record reported — or, when the
// previous owner was kill -9ed before the next run began, somewhere
// between the killed member's last commit in its run and its last record
// (at-least-once).
func (g *groupRun) checkResume() {
	t := g.t
	t.Helper()
	type rec struct {
		m *memberProc
		e memberEvent
	}
	byPart := map[int32][]rec{}
	for _, m := range g.members {
		for _, e := range m.events {
			if e.Ev == "rec" {
				byPart[e.P] = append(byPart[e.P], rec{m, e})
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		rs := byPart[p]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].e.T < rs[j].e.T })
		var runs []recRun
		for _, r := range rs {
			if n := len(runs); n > 0 && runs[n-1].m == r.m && r.e.O == runs[n-1].last+1 {
				runs[n-1].last, runs[n-1].end = r.e.O, r.e.T
				continue
			}
			runs = append(runs, recRun{r.m, r.e.O, r.e.O, r.e.T})
		}
		if runs[0].first != 0 {
			t.Errorf("partition %d: the group started at offset %d, not 0", p, runs[0].first)
		}
		for i := 1; i < len(runs); i++ {
			prev, next := runs[i-1], runs[i]
			start := rs[slices.IndexFunc(rs, func(r rec) bool { return r.m == next.m && r.e.O == next.first && r.e.T > prev.end })].e.T
			if !prev.m.killed || prev.m == next.m || start < prev.m.end {
				if next.first != prev.last+1 {
					t.Errorf("partition %d: %s resumed at %d after %s stopped at %d", p, next.m.name, next.first, prev.m.name, prev.last)
				}
				continue
			}
			low := prev.first - 1
			for _, e := range prev.m.events {
				if e.Ev == "commit" && e.P == p && e.O >= prev.first && e.O <= prev.last {
					low = max(low, e.O)
				}
			}
			if next.first > prev.last+1 || next.first < low+1 {
				t.Errorf("partition %d: %s resumed at %d after killed %s (committed up to %d, consumed up to %d)", p, next.m.name, next.first, prev.m.name, low, prev.last)
			}
		}
	}
}

// produceRound writes n records spread over the topic's partitions and
// returns the end offsets.
func produceRound(t *testing.T, cl *kgo.Client, topic string, partitions int32, n int, ends map[int32]int64) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		p := int32(i) % partitions
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, ends[p]))}
		ends[p]++
	}
	produceSync(t, cl, recs...)
}

// Consumer groups with every franz-go balancer, classic and KIP-848:
// three member processes join one by one, one leaves cleanly and one is
// kill -9ed; every record is consumed, a partition never has two owners,
// and each handover resumes at the committed offset.
func TestGroupMembersJoinLeaveKill(t *testing.T) {
	d := startDaemon(t, groupDaemonConfig)
	const partitions = 6
	for _, balancer := range []string{"range", "roundrobin", "cooperative-sticky", "server-range", "server-uniform"} {
		t.Run(balancer, func(t *testing.T) {
			t.Parallel()
			topic, group := "members-"+balancer, "g-"+balancer
			adm := newAdmin(t, d.Addr())
			createTopic(t, adm, topic, partitions, nil)
			prod := newClient(t, d.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			g := &groupRun{t: t, spec: memberSpec{Addr: d.Addr(), Topic: topic, Group: group, Balancer: balancer}}
			ends := map[int32]int64{}
			round := func() {
				produceRound(t, prod, topic, partitions, 120, ends)
				g.waitConsumed(ends)
			}

			produceRound(t, prod, topic, partitions, 120, ends)
			m1 := g.start("m1")
			g.waitOwners(partitions, "m1")
			g.waitConsumed(ends)
			m2 := g.start("m2")
			g.waitOwners(partitions, "m1", "m2")
			round()
			m3 := g.start("m3")
			g.waitOwners(partitions, "m1", "m2", "m3")
			round()
			g.stop(m1)
			g.waitOwners(partitions, "m2", "m3")
			round()
			g.kill9(m2)
			g.waitOwners(partitions, "m3")
			round()
			g.stop(m3)

			g.checkExclusive()
			g.checkResume()
			committed := fetchCommitted(t, adm, group, topic)
			for p, end := range ends {
				if committed[p] != end {
					t.Errorf("partition %d: committed %d, end %d", p, committed[p], end)
				}
			}
			if t.Failed() {
				for _, m := range g.members {
					t.Logf("%s: %s", m.name, summarize(m.events))
				}
			}
		})
	}
}

// fetchCommitted returns the group's committed offsets of topic.
func fetchCommitted(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := adm.FetchOffsets(testCtx(t, 30*time.Second), group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		out[p] = o.At
	}
	return out
}

// summarize shortens a member's events for a failure message.
func summarize(es []memberEvent) string {
	var b strings.Builder
	recs := 0
	for _, e := range es {
		if e.Ev == "rec" {
			recs++
			continue
		}
		if e.Ev == "commit" {
			continue
		}
		fmt.Fprintf(&b, "%s%v%s@%d ", e.Ev, e.Ps, e.S, e.T)
	}
	fmt.Fprintf(&b, "(%d records)", recs)
	return b.String()
}
