package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/invariant"
)

// Ownership is the coordinator's view of one __consumer_offsets
// partition: whether it holds the partition's groups (Loaded), is reading
// them (Loading), or neither; and the leader epoch it loaded them at.
type Ownership struct {
	Loading, Loaded bool
	// Epoch is the partition's leader epoch the load started at.
	Epoch int32
}

// Owned reports whether the partition is loading or loaded.
func (o Ownership) Owned() bool { return o.Loading || o.Loaded }

// Ownership returns the coordinator's view of partition.
func (c *Coordinator) Ownership(partition int32) Ownership { return c.parts[partition] }

// OwnedPartitions lists the partitions loading or loaded, sorted.
func (c *Coordinator) OwnedPartitions() []int32 {
	ps := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Load is the replay of one __consumer_offsets partition, built apart
// from the coordinator so that the caller can read the log without
// holding up the groups of other partitions. BeginLoad starts it, the
// caller feeds it every record of the partition in log order, and
// FinishLoad installs it.
type Load struct {
	partition, epoch int32
	into             *Coordinator // groups replayed so far; never served
	records, skipped int
}

// Partition is the __consumer_offsets partition being loaded.
func (l *Load) Partition() int32 { return l.partition }

// Epoch is the leader epoch the load started at.
func (l *Load) Epoch() int32 { return l.epoch }

// Records is how many records were replayed.
func (l *Load) Records() int { return l.records }

// Replay applies one record of the partition, read in log order. A
// record that does not decode is skipped with an error wrapping
// ErrCorrupt.
func (l *Load) Replay(now time.Time, key, value []byte) error {
	l.records++
	return l.into.Replay(now, key, value)
}

// BeginLoad records that this broker now leads partition at epoch and is
// about to replay it: until FinishLoad, every request for a group of the
// partition is answered COORDINATOR_LOAD_IN_PROGRESS. State held for the
// partition from an earlier epoch is dropped first (as Unload does; its
// waiting requests are in the Output), so a load always starts from a
// clean slate.
func (c *Coordinator) BeginLoad(now time.Time, partition, epoch int32) (*Load, Output) {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	if c.parts[partition].Owned() {
		out = c.Unload(now, partition)
	}
	c.parts[partition] = Ownership{Loading: true, Epoch: epoch}
	into := &Coordinator{cfg: c.cfg, logger: c.logger, groups: map[string]*group{}}
	return &Load{partition: partition, epoch: epoch, into: into}, out
}

// FinishLoad installs a load if its partition is still loading at the
// load's epoch (an Unload or a newer BeginLoad since makes it stale: it is
// discarded and FinishLoad returns false). Loaded members get fresh
// sessions from now, as in Kafka, so members that keep heartbeating stay
// in their generation across the coordinator's move.
func (c *Coordinator) FinishLoad(now time.Time, l *Load) bool {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	if o := c.parts[l.partition]; !o.Loading || o.Epoch != l.epoch {
		return false
	}
	for _, id := range sortedKeys(l.into.groups) {
		g := l.into.groups[id]
		if c.partitionFor(id) != l.partition {
			// Only if offsets.topic.num.partitions changed under the
			// topic: Kafka would serve it from here all the same, but
			// its requests come to the leader of its own partition.
			l.skipped++
			continue
		}
		if invariant.Enabled {
			invariant.Check(c.groups[id] == nil, "group %s of partition %d already held while loading", id, l.partition)
		}
		g.refreshSessions(now, c.cfg)
		c.groups[id] = g
	}
	if l.skipped > 0 {
		c.logger.Warn("group: __consumer_offsets partition holds groups of other partitions (offsets.topic.num.partitions changed?)",
			"partition", l.partition, "groups", l.skipped)
	}
	c.adoptTxnOffsets(l) // txn_offsets.go
	c.parts[l.partition] = Ownership{Loaded: true, Epoch: l.epoch}
	return true
}

// Unload drops every group of partition, which this broker no longer
// leads: their timers stop with them, and requests waiting on them
// (JoinGroup, SyncGroup) are answered NOT_COORDINATOR in the Output, so
// their clients find the new coordinator. A later load replays the
// partition from scratch.
func (c *Coordinator) Unload(now time.Time, partition int32) Output {
	if invariant.Enabled {
		defer c.checkInvariants()
	}
	var out Output
	for _, id := range sortedKeys(c.groups) {
		if c.partitionFor(id) != partition {
			continue
		}
		if cg := c.groups[id].classic; cg != nil {
			for _, mid := range sortedKeys(cg.members) {
				notCoordinator(cg.members[mid], &out)
			}
		}
		delete(c.groups, id)
	}
	c.dropTxnOffsets(partition) // txn_offsets.go
	delete(c.parts, partition)
	return out
}

// notCoordinator answers a member's waiting requests with NOT_COORDINATOR.
func notCoordinator(m *member, out *Output) {
	if m.joining {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version, resp.ErrorCode, resp.MemberID, resp.Generation = m.joinV, kerr.NotCoordinator.Code, m.id, -1
		out.reply(m.joinW, resp)
		m.joining = false
	}
	if m.syncing {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.Version, resp.ErrorCode = m.syncV, kerr.NotCoordinator.Code
		out.reply(m.syncW, resp)
		m.syncing = false
	}
}

// refreshSessions restarts every member's session (and a KIP-848
// member's revocation timeout) at now.
func (g *group) refreshSessions(now time.Time, cfg Config) {
	if cg := g.classic; cg != nil {
		for _, m := range cg.members {
			m.heartbeatDeadline = now.Add(m.sessionTimeout)
		}
		return
	}
	for _, m := range g.consumer.members {
		m.sessionDeadline = now.Add(cfg.ConsumerSessionTimeout)
		if len(m.revoking) > 0 {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
}

// coordinatorError is the error for a request about group: 0 if the
// group's partition is loaded here, COORDINATOR_LOAD_IN_PROGRESS while
// it loads, NOT_COORDINATOR if this broker does not lead it.
func (c *Coordinator) coordinatorError(group string) int16 {
	switch o := c.parts[c.partitionFor(group)]; {
	case o.Loaded:
		return 0
	case o.Loading:
		return kerr.CoordinatorLoadInProgress.Code
	default:
		return kerr.NotCoordinator.Code
	}
}

// loadingAny reports whether any partition is still loading (ListGroups
// cannot answer for every group then).
func (c *Coordinator) loadingAny() bool {
	for _, o := range c.parts {
		if o.Loading {
			return true
		}
	}
	return false
}

// String describes an ownership for logs.
func (o Ownership) String() string {
	switch {
	case o.Loaded:
		return fmt.Sprintf("loaded at epoch %d", o.Epoch)
	case o.Loading:
		return fmt.Sprintf("loading at epoch %d", o.Epoch)
	}
	return "not owned"
}
