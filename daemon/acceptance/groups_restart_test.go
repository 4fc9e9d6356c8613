package acceptance

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSnapshot is what must not change across a broker restart.
type groupSnapshot struct {
	state   string
	epoch   int32    // KIP-848 group epoch (0 for classic groups)
	members []string // member IDs, sorted
	offsets map[int32]int64
}

func snapshotGroup(t *testing.T, adm *kadm.Client, cl *kgo.Client, group, topic string, kip848 bool) groupSnapshot {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	s := groupSnapshot{offsets: fetchCommitted(t, adm, group, topic)}
	if kip848 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("ConsumerGroupDescribe %s: %v", group, err)
		}
		g := resp.Groups[0]
		s.state, s.epoch = g.State, g.Epoch
		for _, m := range g.Members {
			s.members = append(s.members, m.MemberID)
		}
	} else {
		d, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatalf("DescribeGroups %s: %v", group, err)
		}
		g := d[group]
		s.state = g.State
		for _, m := range g.Members {
			s.members = append(s.members, m.MemberID)
		}
	}
	slices.Sort(s.members)
	return s
}

func (s groupSnapshot) equal(o groupSnapshot) bool {
	if s.state != o.state || s.epoch != o.epoch || !slices.Equal(s.members, o.members) || len(s.offsets) != len(o.offsets) {
		return false
	}
	for p, off := range s.offsets {
		if o.offsets[p] != off {
			return false
		}
	}
	return true
}

// Committed offsets and group state survive a broker restart, clean
// (SIGTERM) and kill -9: members of a classic and of a KIP-848 group keep
// running across it, and afterwards the groups have the same members (the
// KIP-848 group the same epoch: nobody had to rejoin), the same offsets,
// and consumption goes on exactly where it stopped.
func TestGroupStateSurvivesRestart(t *testing.T) {
	for _, kind := range []string{"stop", "kill9"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, groupDaemonConfig)
			const partitions = 6
			adm := newAdmin(t, d.Addr())
			raw := newClient(t, d.Addr())
			prod := newClient(t, d.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			type run struct {
				g      *groupRun
				topic  string
				kip848 bool
				ends   map[int32]int64
				before groupSnapshot
			}
			var runs []*run
			for _, b := range []string{"range", "server-range"} {
				r := &run{topic: "restart-" + b, kip848: b == "server-range", ends: map[int32]int64{}}
				createTopic(t, adm, r.topic, partitions, nil)
				r.g = &groupRun{t: t, spec: memberSpec{Addr: d.Addr(), Topic: r.topic, Group: "restart-" + b, Balancer: b}}
				produceRound(t, prod, r.topic, partitions, 120, r.ends)
				r.g.start("a")
				r.g.start("b")
				r.g.waitOwners(partitions, "a", "b")
				r.g.waitConsumed(r.ends)
				runs = append(runs, r)
			}
			for _, r := range runs {
				want := partitions
				// Settled: every offset committed and the group stable.
				if !waitFor(30*time.Second, func() bool {
					r.before = snapshotGroup(t, adm, raw, r.g.spec.Group, r.topic, r.kip848)
					return r.before.state == "Stable" && len(r.before.offsets) == want && r.before.equal(snapshotGroup(t, adm, raw, r.g.spec.Group, r.topic, r.kip848)) && committedAll(r.before.offsets, r.ends)
				}) {
					t.Fatalf("%s never settled: %+v", r.g.spec.Group, r.before)
				}
			}

			if kind == "stop" {
				if err := d.Stop(); err != nil {
					t.Fatalf("stop: %v", err)
				}
			} else {
				d.Kill9()
			}
			d.Restart(t)

			for _, r := range runs {
				var after groupSnapshot
				if !waitFor(20*time.Second, func() bool {
					after = snapshotGroup(t, adm, raw, r.g.spec.Group, r.topic, r.kip848)
					return after.equal(r.before)
				}) {
					t.Errorf("%s after %s restart: %+v, before %+v", r.g.spec.Group, kind, after, r.before)
				}
			}
			for _, r := range runs {
				produceRound(t, prod, r.topic, partitions, 120, r.ends)
				r.g.waitConsumed(r.ends)
				for _, m := range r.g.members {
					r.g.stop(m)
				}
				r.g.checkExclusive()
				r.g.checkResume()
				final := snapshotGroup(t, adm, raw, r.g.spec.Group, r.topic, r.kip848)
				if !committedAll(final.offsets, r.ends) {
					t.Errorf("%s: committed %v, ends %v", r.g.spec.Group, final.offsets, r.ends)
				}
				if r.kip848 && final.epoch <= r.before.epoch {
					t.Errorf("%s: epoch %d after both members left, want above %d", r.g.spec.Group, final.epoch, r.before.epoch)
				}
			}
		})
	}
}

func committedAll(committed, ends map[int32]int64) bool {
	for p, end := range ends {
		if committed[p] != end {
			return false
		}
	}
	return true
}
