package group

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// Each corruption of a healthy coordinator breaks one `// INVARIANT:`;
// with the invariants build tag the next step must panic naming it
// (go test -tags invariants ./core/group).
func TestInvariantChecksFire(t *testing.T) {
	if !invariant.Enabled {
		t.Skip("invariant checks are built only with -tags invariants")
	}
	tp := topics("t", 2)
	classicGroup := func(t *testing.T) (*Coordinator, *classic) {
		c := testCoordinator(tp)
		stableGroup(t, c, "g", "", "")
		return c, c.group("g").classic
	}
	consumerGroup := func(t *testing.T) (*Coordinator, *consumer) {
		c := testCoordinator(tp)
		hb(c, 0, "a", 0, nil, tp["t"].ID, "t")
		hb(c, 0, "b", 0, nil, tp["t"].ID, "t")
		hb(c, 10, "a", 1, []int32{}, tp["t"].ID)
		hb(c, 10, "b", 1, []int32{}, tp["t"].ID)
		return c, c.group("g").consumer
	}
	cases := []struct {
		name, want string
		corrupt    func(t *testing.T) *Coordinator
	}{
		{"generation goes back", "generation", func(t *testing.T) *Coordinator {
			c, cg := classicGroup(t)
			c.Tick(at(120))
			cg.generation--
			return c
		}},
		{"leader not a member", "leader", func(t *testing.T) *Coordinator {
			c, cg := classicGroup(t)
			cg.leader = "gone"
			return c
		}},
		{"Empty with members", "Empty with", func(t *testing.T) *Coordinator {
			c, cg := classicGroup(t)
			cg.state = StateEmpty
			return c
		}},
		{"group of an unloaded partition", "partition", func(t *testing.T) *Coordinator {
			c, _ := classicGroup(t)
			delete(c.parts, c.partitionFor("g"))
			return c
		}},
		{"partition in two members", "held by", func(t *testing.T) *Coordinator {
			c, cg := consumerGroup(t)
			for p := range cg.members["a"].assigned {
				cg.members["b"].revoking[p] = true
			}
			return c
		}},
		{"member ahead of the assignment", "assignment epoch", func(t *testing.T) *Coordinator {
			c, cg := consumerGroup(t)
			cg.members["a"].epoch = cg.assignmentEpoch + 1
			return c
		}},
		{"group epoch goes back", "epoch", func(t *testing.T) *Coordinator {
			c, cg := consumerGroup(t)
			cg.epoch, cg.assignmentEpoch = 0, 0
			for _, m := range cg.members {
				m.epoch = 0
			}
			return c
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.corrupt(t)
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no invariant check fired")
				}
				if msg, _ := r.(string); !strings.Contains(msg, tc.want) {
					t.Fatalf("panicked with %v, want a message about %q", r, tc.want)
				}
			}()
			c.Tick(at(130))
		})
	}

	t.Run("commit from a stale generation", func(t *testing.T) {
		c, cg := classicGroup(t)
		var id string
		for id = range cg.members {
		}
		r := commitReq("g", map[int32]int64{0: 1})
		r.MemberID, r.Generation = id, cg.generation-1
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "stale") && !strings.Contains(msg, "generation") {
				t.Fatalf("panicked with %q, want the stale-commit invariant", msg)
			}
		}()
		c.checkCommitCurrent(r)
	})
}

// The checks pass on everything the coordinator's own steps do: a
// classic and a KIP-848 group through joins, commits, rebalances, unload,
// reload and expiry (run with -tags invariants; without it this is a
// plain scenario test).
func TestInvariantsHoldThroughLifecycle(t *testing.T) {
	tp := topics("t", 2)
	reload := func(c *Coordinator, group string, log []Record) {
		t.Helper()
		p := c.partitionFor(group)
		c.Unload(at(300), p)
		l, _ := c.BeginLoad(at(300), p, 1)
		for _, rec := range log {
			if err := l.Replay(at(300), rec.Key, rec.Value); err != nil {
				t.Fatal(err)
			}
		}
		if !c.FinishLoad(at(400), l) {
			t.Fatal("reload refused")
		}
	}

	c := testCoordinator(tp)
	ids := stableGroup(t, c, "g", "", "s1")
	cg := c.group("g").classic
	r := commitReq("g", map[int32]int64{0: 5})
	r.MemberID, r.Generation = ids[0], cg.generation
	out := c.OffsetCommit(at(200), r, "w")
	if code := replyTo[*kmsg.OffsetCommitResponse](t, out, "w").Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %d", code)
	}
	c.Apply(at(200), out.Records)
	log := append(out.Records, c.groupRecord(c.group("g"), at(200)))
	reload(c, "g", log)
	if got := len(c.group("g").classic.members); got != 2 {
		t.Fatalf("%d members after reload", got)
	}
	c.Tick(at(100_000)) // every session expires

	l := &kip848Log{c: testCoordinator(tp)}
	id := tp["t"].ID
	l.hb(0, "a", "i", 0, []int32{}, id, "t")
	l.hb(1, "a", "i", 1, []int32{0, 1}, id)
	l.hb(2, "b", "", 0, []int32{}, id, "t")
	l.hb(3, "a", "i", 1, []int32{0, 1}, id)
	l.hb(4, "b", "", 2, []int32{}, id)
	reload(l.c, "g", l.log)
	l.hb(500, "a", "i", 2, []int32{0}, id)
	l.c.Tick(at(100_000))
}
