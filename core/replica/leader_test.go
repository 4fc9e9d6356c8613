package replica

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

const lag = 30 * time.Second

// op is one step of a LeaderState scenario.
type op func(t *testing.T, s *LeaderState)

func at(d time.Duration) time.Time { return t0.Add(d) }

// fetch: follower id fetches at off while the leader's LEO is leo; wantHW
// is the high watermark afterwards.
func fetch(id int32, off, leo int64, when time.Duration, wantHW int64) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		before := s.HighWatermark()
		changed := s.FollowerFetched(id, off, leo, at(when))
		if s.HighWatermark() != wantHW || changed != (wantHW != before) {
			t.Fatalf("fetch by %d at %d (leader LEO %d): HW %d changed=%v, want %d", id, off, leo, s.HighWatermark(), changed, wantHW)
		}
	}
}

func appended(leo, wantHW int64) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		s.LeaderAppended(leo)
		if s.HighWatermark() != wantHW {
			t.Fatalf("after append to %d: HW %d, want %d", leo, s.HighWatermark(), wantHW)
		}
	}
}

// isr checks ISRChange at when; want nil means no change proposed.
func isr(when time.Duration, leo int64, want ...int32) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		got, changed := s.ISRChange(at(when), lag, leo)
		if changed != (want != nil) || !sameSet(got, want) {
			t.Fatalf("ISRChange at %v: %v changed=%v, want %v", when, got, changed, want)
		}
	}
}

func setISR(wantHW int64, ids ...int32) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		s.SetISR(ids)
		if s.HighWatermark() != wantHW || !sameSet(s.ISR(), ids) {
			t.Fatalf("SetISR(%v): ISR %v HW %d, want HW %d", ids, s.ISR(), s.HighWatermark(), wantHW)
		}
	}
}

// undecided: the pending proposal, based on store version base, got no
// answer; wantHW is the high watermark afterwards.
func undecided(base, wantHW int64) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		s.ISRUndecided(base)
		if _, u := s.Pending(); !u || s.HighWatermark() != wantHW {
			t.Fatalf("ISRUndecided(%d): undecided %v HW %d, want true and %d", base, u, s.HighWatermark(), wantHW)
		}
	}
}

func refused(wantHW int64) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		s.ISRRefused()
		if s.HighWatermark() != wantHW {
			t.Fatalf("ISRRefused: HW %d, want %d", s.HighWatermark(), wantHW)
		}
	}
}

func setISRAt(version, wantHW int64, ids ...int32) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		s.SetISRAt(ids, version)
		if s.HighWatermark() != wantHW || !sameSet(s.ISR(), ids) {
			t.Fatalf("SetISRAt(%v, %d): ISR %v HW %d, want HW %d", ids, version, s.ISR(), s.HighWatermark(), wantHW)
		}
	}
}

func seed(hw, want int64) op {
	return func(t *testing.T, s *LeaderState) {
		t.Helper()
		s.SeedHighWatermark(hw)
		if s.HighWatermark() != want {
			t.Fatalf("SeedHighWatermark(%d): HW %d, want %d", hw, s.HighWatermark(), want)
		}
	}
}

func TestLeaderState(t *testing.T) {
	cases := []struct {
		name     string
		replicas []int32
		isr      []int32
		leo      int64
		ops      []op
	}{
		{"the high watermark is the smallest log end offset over the ISR, the leader included",
			[]int32{1, 2, 3}, []int32{1, 2, 3}, 10, []op{
				fetch(2, 10, 10, 1, 0),
				fetch(3, 7, 10, 1, 7),
				fetch(3, 10, 12, 2, 10),
				fetch(2, 12, 12, 3, 10),
				fetch(3, 12, 12, 3, 12),
			}},
		{"an ISR member that has not fetched yet holds the high watermark",
			[]int32{1, 2, 3}, []int32{1, 2, 3}, 10, []op{
				fetch(2, 10, 10, 1, 0),
				appended(15, 0),
				fetch(2, 15, 15, 1, 0),
			}},
		{"the high watermark never moves backwards while leading",
			[]int32{1, 2}, []int32{1, 2}, 10, []op{
				seed(8, 8),
				fetch(2, 5, 10, 1, 8),
				seed(3, 8),
				fetch(2, 9, 10, 2, 9),
			}},
		{"a seeded high watermark is capped at the leader's log end",
			[]int32{1, 2}, []int32{1, 2}, 10, []op{seed(50, 10)}},
		{"a lone leader's high watermark follows its log end offset",
			[]int32{1}, []int32{1}, 4, []op{
				appended(4, 4),
				appended(9, 9),
			}},
		{"fetches from replicas outside the assignment are ignored",
			[]int32{1, 2}, []int32{1, 2}, 10, []op{
				fetch(7, 10, 10, 1, 0),
				fetch(2, 10, 10, 1, 10),
			}},
		{"a follower not caught up within replica.lag.time.max.ms leaves the ISR",
			[]int32{1, 2, 3}, []int32{1, 2, 3}, 10, []op{
				fetch(2, 10, 10, 1*time.Second, 0),
				fetch(3, 4, 10, 1*time.Second, 4),
				isr(lag, 10), // ISR members start caught up at t0
				isr(lag+time.Second, 10, 1, 2),
				setISR(10, 1, 2), // the laggard no longer holds the high watermark
			}},
		{"a follower reaching the leader's log end of its previous fetch was caught up at that fetch",
			[]int32{1, 2}, []int32{1, 2}, 10, []op{
				fetch(2, 5, 10, 20*time.Second, 5),
				fetch(2, 10, 20, 40*time.Second, 10), // caught up as of 20s
				isr(20*time.Second+lag, 20),
				isr(20*time.Second+lag+time.Millisecond, 20, 1),
			}},
		{"a follower at the leader's log end is in sync however long ago it caught up",
			[]int32{1, 2}, []int32{1, 2}, 10, []op{
				fetch(2, 10, 10, time.Second, 10),
				isr(time.Hour, 10),
			}},
		{"a replica joins the ISR once it fetched in this epoch and reached the high watermark",
			[]int32{1, 2, 3}, []int32{1, 2}, 10, []op{
				fetch(2, 10, 10, 1, 10),
				isr(2, 10),
				fetch(3, 8, 10, 3, 10),
				isr(4, 10),
				fetch(3, 10, 10, 5, 10),
				isr(6, 10, 1, 2, 3),
			}},
		{"a replica must also reach the offset the leader epoch started at",
			[]int32{1, 2, 3}, []int32{1, 3}, 10, []op{
				seed(5, 5), // 3 has not fetched yet, so this holds
				fetch(2, 7, 10, 1, 5),
				isr(2, 10),
				fetch(2, 10, 10, 3, 5),
				isr(4, 10, 1, 2, 3),
			}},
		{"a pending expansion holds the high watermark for the joining replica",
			[]int32{1, 2, 3}, []int32{1, 2}, 10, []op{
				fetch(2, 10, 10, 1, 10),
				fetch(3, 10, 10, 1, 10),
				isr(2, 10, 1, 2, 3),
				appended(20, 10),
				fetch(2, 20, 20, 3, 10),
				fetch(3, 15, 20, 3, 15),
				setISR(15, 1, 2, 3),
				fetch(3, 20, 20, 4, 20),
			}},
		{"a rejected proposal leaves the committed ISR in charge",
			[]int32{1, 2, 3}, []int32{1, 2}, 10, []op{
				fetch(2, 10, 10, 1, 10),
				fetch(3, 10, 10, 1, 10),
				isr(2, 10, 1, 2, 3),
				setISR(10, 1, 2),
				appended(20, 10),
				fetch(2, 20, 20, 3, 20),
			}},
		{"an expansion whose outcome is unknown holds the high watermark and is proposed again until a later committed ISR",
			[]int32{1, 2, 3}, []int32{1, 2}, 10, []op{
				fetch(2, 10, 10, 1, 10),
				fetch(3, 10, 10, 1, 10),
				isr(2, 10, 1, 2, 3),
				undecided(7, 10),
				appended(20, 10),
				fetch(2, 20, 20, 3, 10), // 3 may be in the store's ISR: it holds the HW
				refused(10),             // an answer that wrote nothing does not end an unknown outcome
				isr(4, 20, 1, 2, 3),     // proposed again, unchanged
				setISRAt(7, 10, 1, 2),   // a view at the base version: the write may still land
				fetch(2, 20, 20, 5, 10),
				setISRAt(8, 20, 1, 2), // a later version decides it
			}},
		{"an undecided expansion the store did take is installed by the later view",
			[]int32{1, 2, 3}, []int32{1, 2}, 10, []op{
				fetch(2, 10, 10, 1, 10),
				fetch(3, 10, 10, 1, 10),
				isr(2, 10, 1, 2, 3),
				undecided(7, 10),
				appended(20, 10),
				fetch(2, 20, 20, 3, 10),
				setISRAt(8, 10, 1, 2, 3),
				fetch(3, 20, 20, 4, 20),
			}},
		{"an undecided shrink keeps the lagging member in charge of the high watermark",
			[]int32{1, 2, 3}, []int32{1, 2, 3}, 10, []op{
				fetch(2, 10, 10, 1*time.Second, 0),
				fetch(3, 4, 10, 1*time.Second, 4),
				isr(lag+time.Second, 10, 1, 2),
				undecided(7, 4),
				fetch(2, 10, 10, lag+2*time.Second, 4),
				isr(lag+3*time.Second, 10, 1, 2),
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewLeaderState(c.replicas, c.isr, 1, 5, c.leo, t0)
			if s.LeaderEpoch() != 5 {
				t.Fatalf("leader epoch %d", s.LeaderEpoch())
			}
			for _, o := range c.ops {
				o(t, s)
			}
		})
	}
}

func TestLeaderStateKeepsLeaderInISR(t *testing.T) {
	s := NewLeaderState([]int32{1, 2}, []int32{2}, 1, 0, 0, t0)
	if got := s.ISR(); !slices.Contains(got, 1) {
		t.Fatalf("ISR %v lacks the leader", got)
	}
	s.SetISR([]int32{2})
	if got := s.ISR(); !slices.Contains(got, 1) {
		t.Fatalf("ISR %v after SetISR lacks the leader", got)
	}
	// Even far past the lag the leader never shrinks itself out.
	got, _ := s.ISRChange(t0.Add(time.Hour), lag, 0)
	if got != nil && !slices.Contains(got, 1) {
		t.Fatalf("proposal %v drops the leader", got)
	}
}
