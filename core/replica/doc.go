// Package replica holds the replication logic of a partition that is not
// tied to the broker: the leader's view of its followers (LeaderState: the
// high watermark and ISR decisions, a pure state machine) and the
// follower's fetchers (Fetchers: one goroutine per source broker fetching
// for every partition followed from it).
//
// # Follower fetch protocol
//
// Followers send Fetch v12 (KIP-320) with ReplicaID (and ReplicaState for
// v15+ leaders) set to their node ID, no fetch session (SessionID 0,
// SessionEpoch -1), and per partition FetchOffset = the follower's log end
// offset, LastFetchedEpoch = the latest epoch of its leader-epoch cache
// and CurrentLeaderEpoch = the leader epoch it knows. Per partition answer:
//
//	no error, DivergingEpoch set   truncate (truncationOffset) and fetch again
//	no error                       AppendFetched(records, HW, log start)
//	OFFSET_OUT_OF_RANGE            resolveOutOfRange: ListOffsets earliest;
//	                               restart the log at the leader's start if
//	                               that is beyond ours, else
//	                               OffsetForLeaderEpoch(last epoch), else
//	                               ListOffsets latest
//	NOT_LEADER_OR_FOLLOWER,        back off replica.fetch.backoff.ms or until
//	FENCED/UNKNOWN_LEADER_EPOCH,   Follow is called again with new metadata
//	other errors
//
// A follower never truncates to its own high watermark (KIP-101).
//
// # Connections
//
// WireDialer's client speaks the protocol itself (kmsg encodes and
// decodes) over one connection per source broker: ApiVersions on connect,
// then, on a SASL inter-broker listener, SaslHandshake v1 and
// SaslAuthenticate (a KIP-368 session lifetime makes it reconnect before
// the session ends); TLS when configured. It reads every response into
// one buffer it reuses, so replicating costs no allocation per fetch; the
// record batches of a Fetch answer are valid until the client's next
// request, and the fetcher applies them before sending another.
//
// # What the leader must serve (core/broker)
//
// Fetch v12 from a replica: check CurrentLeaderEpoch (FENCED_LEADER_EPOCH /
// UNKNOWN_LEADER_EPOCH); if LastFetchedEpoch >= 0, look up
// EndOffsetForEpoch(LastFetchedEpoch) on the leader log and answer
// DivergingEpoch{epoch, end} with no records when the epoch differs or
// end < FetchOffset; otherwise read up to the log end offset (not the high
// watermark) and call LeaderState.FollowerFetched(id, FetchOffset, LEO).
// ListOffsets with ReplicaID >= 0 answers latest with the log end offset.
package replica
