package broker

import (
	"slices"
	"sync"
	"sync/atomic"
)

// role is what this broker is for a partition.
type role int32

const (
	// roleLeader serves produce and fetch. In single-node mode every
	// partition is led by this broker from the start.
	roleLeader role = iota
	// roleFollower copies the leader's log through a fetcher.
	roleFollower
	// roleNone: not a replica, or the partition is offline.
	roleNone
)

func (r role) String() string {
	switch r {
	case roleLeader:
		return "leader"
	case roleFollower:
		return "follower"
	}
	return "none"
}

// partView is a partition's replication state as the controller last
// published it (and, for the ISR, as this leader last changed it).
// Immutable once published.
type partView struct {
	leader         int32 // -1: offline
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	version        int64 // store version of /partitions/<topic>/<p>
}

// replState is the replication half of a partition: its role, the
// published view, and the wake-ups of requests waiting on either.
type replState struct {
	roleV atomic.Int32
	view  atomic.Pointer[partView]

	// roleMu serializes role transitions (ApplyPartition, ISR commits).
	roleMu sync.Mutex
	// followAddr is the leader address the fetchers were given ("" when
	// not following); guarded by roleMu.
	followAddr string
}

func (p *partition) role() role          { return role(p.repl.roleV.Load()) }
func (p *partition) isLeader() bool      { return p.role() == roleLeader }
func (p *partition) viewOf() *partView   { return p.repl.view.Load() }
func (p *partition) setView(v *partView) { p.repl.view.Store(v) }

// setSingle makes the partition led by node alone, as in single-node
// mode.
func (p *partition) setSingle(node int32) {
	p.repl.roleV.Store(int32(roleLeader))
	p.setView(&partView{leader: node, leaderEpoch: p.leaderEpoch.Load(), replicas: []int32{node}, isr: []int32{node}})
}

// isrSize is the size of the ISR as last published.
func (p *partition) isrSize() int {
	if v := p.viewOf(); v != nil {
		return len(v.isr)
	}
	return 1
}

// wake wakes every request waiting on the partition's high watermark:
// fetches and acks=all produces re-check their state.
func (p *partition) wake() {
	p.hwMu.Lock()
	close(p.hwCh)
	p.hwCh = make(chan struct{})
	p.hwMu.Unlock()
}

// sameInts reports whether two replica lists hold the same IDs in the same
// order.
func sameInts(a, b []int32) bool { return slices.Equal(a, b) }
