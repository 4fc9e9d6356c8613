package replica

import (
	"slices"
	"time"
)

// LeaderState is the leader's view of one partition it leads in one
// leader epoch: each follower's log end offset and catch-up time, the
// high watermark and the in-sync replica set. It is a pure state machine:
// no I/O, no clock of its own (every input carries now), not safe for
// concurrent use (the broker's partition guards it). A new leader epoch
// gets a new LeaderState.
//
// Rules, as Kafka's Partition and Replica classes apply them:
//
//   - The high watermark is the smallest log end offset over the maximal
//     ISR (the ISR plus replicas a pending expansion adds), the leader's
//     own included; it only moves forward while leading and never passes
//     the leader's log end offset. A member whose log end offset is not
//     known yet holds it where it is.
//   - A follower is caught up at a fetch whose offset reaches the leader's
//     log end offset then; a fetch reaching the leader's log end offset of
//     the follower's previous fetch makes it caught up as of that previous
//     fetch (Kafka's lastCaughtUpTime).
//   - ISR shrink: a member other than the leader that is not at the
//     leader's log end offset and was last caught up more than
//     replica.lag.time.max.ms ago leaves.
//   - ISR expand: a replica joins once it has fetched in this leader epoch
//     and its log end offset reaches both the high watermark and the
//     offset this leader epoch started at.
//   - A proposal whose outcome is unknown (the store call timed out: the
//     write may have landed) stays in the maximal ISR, and is proposed
//     again unchanged, until a committed ISR read at a store version past
//     the one it was based on replaces it (ISRUndecided, SetISRAt). Were
//     it dropped, an expansion the store did take would be left out of
//     the high watermark while the controller may elect the added replica.
type LeaderState struct {
	leaderID, epoch int32
	replicas        []int32
	isr             []int32
	pending         []int32 // proposed ISR awaiting SetISR; nil if none
	undecided       bool    // pending's outcome is unknown (see ISRUndecided)
	pendingBase     int64   // the store version an undecided pending was based on
	epochStart      int64   // leader's log end offset when the epoch began
	leaderLEO       int64
	hw              int64
	followers       map[int32]*followerState
}

// followerState is the leader's record of one follower.
type followerState struct {
	leo            int64 // -1 until the first fetch in this epoch
	lastCaughtUp   time.Time
	lastFetchLEO   int64 // leader's log end offset at the previous fetch, -1 none
	lastFetch      time.Time
	fetchedInEpoch bool
}

// NewLeaderState starts leading in leaderEpoch with the given assignment
// and ISR, the leader's log end offset leo, at time now. ISR members start
// caught up as of now (so they get replica.lag.time.max.ms to fetch);
// other replicas start lagging. The high watermark starts at leo when the
// leader is the only ISR member and at 0 otherwise; SeedHighWatermark sets
// the one the replica had as follower.
func NewLeaderState(replicas, isr []int32, leaderID int32, leaderEpoch int32, leo int64, now time.Time) *LeaderState {
	s := &LeaderState{
		leaderID: leaderID, epoch: leaderEpoch,
		replicas:   slices.Clone(replicas),
		isr:        slices.Clone(isr),
		epochStart: leo, leaderLEO: leo,
		followers: map[int32]*followerState{},
	}
	if !slices.Contains(s.isr, leaderID) {
		s.isr = append(s.isr, leaderID)
	}
	for _, id := range append(slices.Clone(replicas), isr...) {
		f := s.track(id)
		if f != nil && slices.Contains(isr, id) {
			f.lastCaughtUp = now
		}
	}
	s.maybeAdvanceHW()
	return s
}

// SeedHighWatermark raises the high watermark to hw (capped at the
// leader's log end offset), as a new leader keeps the one it had as a
// follower. It never lowers it.
func (s *LeaderState) SeedHighWatermark(hw int64) {
	s.hw = max(s.hw, min(hw, s.leaderLEO))
}

// LeaderEpoch returns the epoch this state was created for.
func (s *LeaderState) LeaderEpoch() int32 { return s.epoch }

// HighWatermark returns the high watermark.
func (s *LeaderState) HighWatermark() int64 { return s.hw }

// ISR returns the committed in-sync replica set.
func (s *LeaderState) ISR() []int32 { return slices.Clone(s.isr) }

// FollowerLEO returns a follower's log end offset as of its last fetch in
// this epoch, or -1 if unknown.
func (s *LeaderState) FollowerLEO(id int32) int64 {
	if f := s.followers[id]; f != nil {
		return f.leo
	}
	return -1
}

// FollowerFetched records a fetch by follower id at fetchOffset (its log
// end offset) when the leader's log end offset is leaderLEO. It reports
// whether the high watermark moved. Fetches from replicas outside the
// assignment are ignored.
func (s *LeaderState) FollowerFetched(id int32, fetchOffset int64, leaderLEO int64, now time.Time) (hwChanged bool) {
	f := s.followers[id]
	if f == nil {
		return false
	}
	s.leaderLEO = max(s.leaderLEO, leaderLEO)
	switch {
	case fetchOffset >= leaderLEO:
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	case f.lastFetchLEO >= 0 && fetchOffset >= f.lastFetchLEO:
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.leo = fetchOffset
	f.lastFetchLEO, f.lastFetch = leaderLEO, now
	f.fetchedInEpoch = true
	return s.maybeAdvanceHW()
}

// LeaderAppended records the leader's new log end offset after an append
// and reports whether the high watermark moved (it does when the leader is
// the only member).
func (s *LeaderState) LeaderAppended(leaderLEO int64) (hwChanged bool) {
	s.leaderLEO = max(s.leaderLEO, leaderLEO)
	return s.maybeAdvanceHW()
}

// ISRChange applies the shrink and expand rules at now and returns the
// ISR the leader should propose to the store, or changed=false. The
// proposal is pending until SetISR: meanwhile the high watermark also
// waits for the replicas it adds.
//
// While a proposal is undecided it is returned again, unchanged: its
// outcome must be known before another change is built on the ISR.
func (s *LeaderState) ISRChange(now time.Time, lagMax time.Duration, leaderLEO int64) (newISR []int32, changed bool) {
	s.leaderLEO = max(s.leaderLEO, leaderLEO)
	if s.undecided {
		return slices.Clone(s.pending), true
	}
	for _, id := range s.isr {
		if id == s.leaderID || s.caughtUp(id, now, lagMax) {
			newISR = append(newISR, id)
		}
	}
	for _, id := range s.replicas {
		if !slices.Contains(newISR, id) && !slices.Contains(s.isr, id) && s.canJoin(id) {
			newISR = append(newISR, id)
		}
	}
	if sameSet(newISR, s.isr) {
		return nil, false
	}
	s.pending = slices.Clone(newISR)
	return newISR, true
}

// SetISR installs the ISR the store accepted (or holds after a failed
// proposal), clears any pending proposal and reports whether the high
// watermark moved.
func (s *LeaderState) SetISR(isr []int32) (hwChanged bool) {
	s.installISR(isr)
	s.pending, s.undecided = nil, false
	return s.maybeAdvanceHW()
}

// installISR makes isr (plus the leader) the committed ISR.
func (s *LeaderState) installISR(isr []int32) {
	s.isr = slices.Clone(isr)
	if !slices.Contains(s.isr, s.leaderID) {
		s.isr = append(s.isr, s.leaderID)
	}
	for _, id := range s.isr {
		s.track(id)
	}
}

// SetISRAt is SetISR for an ISR committed at store version: an undecided
// proposal based on version or later stays pending (its write may still
// land), one based on an older version is over.
func (s *LeaderState) SetISRAt(isr []int32, version int64) (hwChanged bool) {
	if !s.undecided || version > s.pendingBase {
		return s.SetISR(isr)
	}
	s.installISR(isr)
	return s.maybeAdvanceHW()
}

// ISRUndecided says the store call for the pending proposal, based on
// store version base, failed without saying whether it was applied. The
// proposal stays in the maximal ISR (the high watermark waits for the
// replicas it adds) and ISRChange returns it again until SetISRAt
// installs an ISR committed after base. A no-op without a proposal.
func (s *LeaderState) ISRUndecided(base int64) {
	if s.pending == nil {
		return
	}
	s.undecided, s.pendingBase = true, base
}

// ISRRefused drops a pending proposal the store refused without applying
// it, unless an earlier attempt of it is undecided (that write may still
// land). It reports whether the high watermark moved.
func (s *LeaderState) ISRRefused() (hwChanged bool) {
	if s.undecided {
		return false
	}
	s.pending = nil
	return s.maybeAdvanceHW()
}

// Pending returns the proposed ISR awaiting an answer (nil if none) and
// whether its outcome is unknown.
func (s *LeaderState) Pending() ([]int32, bool) { return slices.Clone(s.pending), s.undecided }

// track returns the state of follower id, creating it (log end offset
// unknown, never caught up) on first sight; nil for the leader.
func (s *LeaderState) track(id int32) *followerState {
	if id == s.leaderID {
		return nil
	}
	f := s.followers[id]
	if f == nil {
		f = &followerState{leo: -1, lastFetchLEO: -1}
		s.followers[id] = f
	}
	return f
}

// caughtUp is Kafka's Replica.isCaughtUp.
func (s *LeaderState) caughtUp(id int32, now time.Time, lagMax time.Duration) bool {
	f := s.followers[id]
	if f == nil {
		return false // not in the assignment: never in sync
	}
	return f.leo == s.leaderLEO || now.Sub(f.lastCaughtUp) <= lagMax
}

// canJoin is Kafka's isFollowerInSync for ISR expansion.
func (s *LeaderState) canJoin(id int32) bool {
	f := s.followers[id]
	return f != nil && f.fetchedInEpoch && f.leo >= s.hw && f.leo >= s.epochStart
}

// maybeAdvanceHW moves the high watermark to the smallest log end offset
// of the maximal ISR when that is higher.
func (s *LeaderState) maybeAdvanceHW() bool {
	hw := s.leaderLEO
	for _, members := range [][]int32{s.isr, s.pending} {
		for _, id := range members {
			if id == s.leaderID {
				continue
			}
			f := s.followers[id]
			if f == nil || f.leo < 0 {
				return false
			}
			hw = min(hw, f.leo)
		}
	}
	if hw <= s.hw {
		return false
	}
	// INVARIANT: the high watermark never decreases while leading.
	s.hw = hw
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
