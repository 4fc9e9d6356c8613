// Package partition holds the replication state of one partition on this
// broker: its role (leader, follower or neither), the published view
// (leader, leader epoch, partition epoch, replicas, ISR), the leader's
// follower tracking (a replica.LeaderState) and the high watermark, with
// the log they govern. core/broker's handlers ask a Partition; they never
// read a role and an epoch one field at a time.
//
// It is a package of its own, not part of core/replica, because it owns a
// *log.Log and the locks around it: core/replica stays the replication
// protocol without storage (the LeaderState state machine, the follower's
// fetchers), and a Partition is what the fetchers drive
// (replica.FollowerPartition) and what the broker's Produce, Fetch and
// group coordinator write through.
//
// # Roles and transitions
//
//	         BecomeLeader(e)            BecomeFollower(e')
//	None ────────────────────▶ Leader ────────────────────▶ Follower
//	  ▲  ◀──── BecomeNone / Fence ──┘  ◀─── BecomeLeader(e'') ──┘
//	  └────────────────────────── BecomeNone ◀──────────────────┘
//
// A view is applied only if it is not older than the one held (a lower
// store version with a leader epoch that is not higher is stale). The
// leader epoch never decreases. Becoming leader at a new epoch records the
// epoch's start offset (the log end) in the log's epoch cache before any
// append under it. A new replica list within an epoch (a reassignment)
// restarts the follower tracking but keeps the epoch cache.
//
// # Locks
//
// Four locks, always taken in this order:
//
//  1. trans (sync.Mutex): serializes role transitions. The broker holds
//     it (LockTransitions) across replica.Fetchers.Unfollow/Follow and the
//     Become*Locked calls, so a fetcher never runs a follower call into a
//     partition that has become leader. Methods named *Locked need it.
//  2. mu (sync.RWMutex): the leader/ISR lock, Kafka's leaderIsrUpdateLock.
//     Held for read across every append: the leader check, the caller's
//     validation and the log append of AppendAsLeader, and the follower
//     calls (AppendFetched, TruncateTo, TruncateFullyAndStartAt). Held for
//     write to change the role, the leader epoch, the view or the
//     LeaderState. So a leadership change waits for appends in flight, and
//     an append never lands under an epoch this broker no longer leads.
//  3. lsMu (sync.Mutex): the contents of the LeaderState, which fetches
//     from followers update concurrently under mu held for read.
//  4. hwMu (sync.Mutex): the high watermark's wake-up channel.
//
// core/log's locks nest inside mu (read for appends and truncation, write
// for AssignEpochStart); core/log never calls back into this package.
// lsMu and hwMu are leaves: nothing is called while holding them but
// LeaderState methods and channel operations. replica.Fetchers' locks sit
// between trans and mu: Unfollow waits for a follower call in progress,
// which holds mu for read, so trans holders must not hold mu while
// calling Unfollow (Become*Locked take and release mu themselves).
//
// Reads that need no decision (Metadata, DescribeLogDirs, FindCoordinator)
// use State, an immutable snapshot published under mu, so the role, the
// epoch and the view they see are one consistent state.
//
// # Invariants
//
// Checked under the invariants build tag (core/invariant):
//
//   - HW <= LEO when the high watermark moves;
//   - log start <= HW when the high watermark moves;
//   - the leader epoch never decreases;
//   - the high watermark moves forward only, except by truncation or a
//     restart of the log (follower paths).
package partition
