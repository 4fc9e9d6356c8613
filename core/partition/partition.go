package partition

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/invariant"
	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/replica"
)

// Role is what this broker is for a partition.
type Role int32

const (
	// None: not a replica, the partition is offline, or this broker is
	// fenced. The zero Role.
	None Role = iota
	// Leader serves produce and fetch.
	Leader
	// Follower copies the leader's log through a fetcher.
	Follower
)

func (r Role) String() string {
	switch r {
	case Leader:
		return "leader"
	case Follower:
		return "follower"
	}
	return "none"
}

// View is a partition's replication state as the controller last
// published it (and, for the ISR, as this leader last changed it).
// Immutable once handed to a Partition.
type View struct {
	Leader         int32 // -1: offline
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	Version        int64 // store version of the partition's state
}

// State is a consistent snapshot of a partition's role and view.
type State struct {
	Role Role
	View View
}

// ErrNotLeader is returned by leader operations on a partition this
// broker does not lead (at the expected epoch).
var ErrNotLeader = fmt.Errorf("partition: not the leader: %w", kerr.NotLeaderForPartition)

// ErrNotFollower is returned by follower operations on a partition this
// broker no longer follows.
var ErrNotFollower = fmt.Errorf("partition: not a follower: %w", kerr.NotLeaderForPartition)

// Partition is one partition on this broker. See the package doc for its
// roles and lock order.
type Partition struct {
	topic string
	index int32
	log   *log.Log
	cfg   atomic.Pointer[config.Topic]

	trans sync.Mutex // role transitions; see LockTransitions

	mu     sync.RWMutex         // the leader/ISR lock
	role   Role                 // guarded by mu
	view   View                 // guarded by mu
	leader *replica.LeaderState // non-nil while leading; guarded by mu, contents by lsMu
	lsMu   sync.Mutex

	state atomic.Pointer[State] // published under mu (write)

	hw   atomic.Int64
	hwMu sync.Mutex
	hwCh chan struct{} // closed when hw next advances or the role changes; guarded by hwMu
	// hwTaken: HWChanged handed out hwCh since it was last replaced;
	// guarded by hwMu. Wake keeps a channel nobody took, so an append
	// nobody waits on allocates none.
	hwTaken bool
	// viewCh is closed when the role or view next changes (Wake), not by
	// high watermark moves; viewTaken is hwTaken for it. Guarded by hwMu.
	viewCh    chan struct{}
	viewTaken bool
}

// New returns a partition over l with no role. Its high watermark starts
// at the log end (what a restarted broker knows) until a role sets it.
func New(topic string, index int32, l *log.Log, cfg config.Topic) *Partition {
	p := &Partition{topic: topic, index: index, log: l, hwCh: make(chan struct{}), viewCh: make(chan struct{})}
	p.cfg.Store(&cfg)
	p.hw.Store(l.EndOffset())
	p.view = View{Leader: -1}
	p.publishLocked()
	return p
}

func (p *Partition) String() string { return p.topic + "-" + strconv.Itoa(int(p.index)) }

// TopicPartition names the partition (replica.FollowerPartition).
func (p *Partition) TopicPartition() (string, int32) { return p.topic, p.index }

// Log returns the partition's log.
func (p *Partition) Log() *log.Log { return p.log }

// Config returns the topic config in force.
func (p *Partition) Config() *config.Topic { return p.cfg.Load() }

// SetConfig replaces the topic config; logCfg is applied to the log.
func (p *Partition) SetConfig(cfg config.Topic, logCfg log.Config) {
	p.cfg.Store(&cfg)
	p.log.SetConfig(logCfg)
}

// State returns the partition's role and view as one snapshot.
func (p *Partition) State() State { return *p.state.Load() }

// Role returns the partition's role.
func (p *Partition) Role() Role { return p.state.Load().Role }

// IsLeader reports whether this broker leads the partition.
func (p *Partition) IsLeader() bool { return p.Role() == Leader }

// LeaderEpoch returns the leader epoch this broker knows.
func (p *Partition) LeaderEpoch() int32 { return p.state.Load().View.LeaderEpoch }

// ISRSize is the size of the ISR as last published.
func (p *Partition) ISRSize() int { return len(p.state.Load().View.ISR) }

// publishLocked publishes the current role and view. REQUIRES: mu (write).
func (p *Partition) publishLocked() {
	v := p.view
	v.Replicas, v.ISR = slices.Clone(v.Replicas), slices.Clone(v.ISR)
	p.state.Store(&State{Role: p.role, View: v})
}

// HighWatermark is the offset below which records are committed and
// visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// HWChanged returns a channel closed the next time the high watermark
// advances or the partition's role or view changes. Take it before
// checking the state it guards, so no change is missed.
func (p *Partition) HWChanged() <-chan struct{} {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	p.hwTaken = true
	return p.hwCh
}

// ViewChanged returns a channel closed the next time the partition's role
// or view changes (every Wake), but not when only the high watermark
// moves: a follower's fetch, which reads up to the log end, waits on it
// and the log's Changed instead of HWChanged, so the high watermark moves
// its own fetch causes do not wake the other followers' fetches for
// nothing (BENCHMARKS.md, issue 15 session 4). Take it before checking
// the state it guards.
func (p *Partition) ViewChanged() <-chan struct{} {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	p.viewTaken = true
	return p.viewCh
}

// Wake wakes every request waiting on the partition: fetches and acks=all
// produces re-check their state.
func (p *Partition) Wake() {
	p.hwMu.Lock()
	p.wakeHWLocked()
	if p.viewTaken {
		close(p.viewCh)
		p.viewCh = make(chan struct{})
		p.viewTaken = false
	}
	p.hwMu.Unlock()
}

// wakeHWLocked wakes the holders of HWChanged. REQUIRES: hwMu.
func (p *Partition) wakeHWLocked() {
	if p.hwTaken {
		close(p.hwCh)
		p.hwCh = make(chan struct{})
		p.hwTaken = false
	}
}

// wakeHW wakes what waits for the high watermark (HWChanged), not for
// the view.
func (p *Partition) wakeHW() {
	p.hwMu.Lock()
	p.wakeHWLocked()
	p.hwMu.Unlock()
}

// advanceHW raises the high watermark to hw if that is higher and wakes
// waiters.
func (p *Partition) advanceHW(hw int64) {
	for {
		cur := p.hw.Load()
		if hw <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, hw) {
			break
		}
	}
	if invariant.Enabled {
		// INVARIANT: HW <= LEO and log start <= HW whenever the HW moves.
		leo, start := p.log.EndOffset(), p.log.StartOffset()
		invariant.Check(hw <= leo, "partition %s: high watermark %d above log end %d", p, hw, leo)
		invariant.Check(start <= hw, "partition %s: log start %d above high watermark %d", p, start, hw)
	}
	p.wakeHW()
}

// lowerHW lowers the high watermark to at most hw (the log was truncated
// or restarted).
func (p *Partition) lowerHW(hw int64) {
	for {
		cur := p.hw.Load()
		if cur <= hw {
			return
		}
		if p.hw.CompareAndSwap(cur, hw) {
			p.wakeHW()
			return
		}
	}
}

// LockTransitions takes the transition lock: role changes are serialized
// and the caller may Unfollow/Follow the partition's fetcher while
// holding it. See the package doc for the order.
func (p *Partition) LockTransitions() { p.trans.Lock() }

// UnlockTransitions releases the transition lock.
func (p *Partition) UnlockTransitions() { p.trans.Unlock() }

// Stale reports whether v is older than the view held: a lower store
// version without a higher leader epoch (an ISR change this leader
// committed got here before the watcher's copy of an earlier one).
func (p *Partition) Stale(v View) bool {
	cur := p.State().View
	return cur.Version > v.Version && cur.LeaderEpoch >= v.LeaderEpoch
}

// setViewLocked installs v as the view. Callers refuse or clamp a view
// whose leader epoch is older than the one held. REQUIRES: mu (write).
func (p *Partition) setViewLocked(v View) {
	// INVARIANT: the leader epoch never decreases.
	if invariant.Enabled {
		invariant.Check(v.LeaderEpoch >= p.view.LeaderEpoch, "partition %s: leader epoch %d -> %d", p, p.view.LeaderEpoch, v.LeaderEpoch)
	}
	v.Replicas, v.ISR = slices.Clone(v.Replicas), slices.Clone(v.ISR)
	p.view = v
}
