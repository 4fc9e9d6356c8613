// Package raft is the replicated sdk.MetadataStore of a Vltava cluster,
// like Kafka's KRaft: every voter (broker) runs a hashicorp/raft node with
// a durable log (raft-boltdb) and file snapshots, and the key space is a
// deterministic state machine fed by the raft log. Any voter's Store
// serves every method.
//
// # Roles of a request
//
//   - Writes (Put, Delete, Txn, GrantSession, RevokeSession) are raft log
//     entries. On the leader they are appended directly; a follower
//     forwards the encoded entry to the leader. The reply carries the
//     state machine's answer (new revision, or the failed condition).
//   - Get, List and Watch's "from now" revision are linearizable reads
//     on the leader: a raft barrier once per leadership term (so every
//     entry committed by earlier leaders is applied), then VerifyLeader
//     (no newer leader exists). Followers forward them.
//   - Watch streams come from the node's own applied log: every node
//     applies every entry in order, so a watch on a follower sees every
//     change exactly once, in revision order. Each node keeps a bounded
//     in-memory history (Config.WatchHistory events) for watches from a
//     past revision; older ones, and any from before the snapshot a node
//     restored, fail with sdk.ErrCompacted. Compact trims only the local
//     node's history.
//   - KeepAlive goes to the leader (forwarded if need be), which commits
//     a keep-alive entry (see Sessions).
//
// Every forwarded call has a deadline: the caller's, else LeaderWait. A
// leader reached through a network that silently drops packets costs the
// caller its deadline, never a TCP timeout (a broker's session keeper
// depends on it to fence itself in time).
//
// A follower retries while no leader is known, the leader is unreachable
// or the node it reached no longer leads (nothing was applied in those
// cases), for up to Config.LeaderWait; then sdk.ErrUnavailable. A write
// whose leader lost leadership mid-commit, or whose forwarded reply was
// lost, fails with sdk.ErrUnavailable: its outcome is unknown, as the
// contract allows. Once proposed, a write waits for raft's outcome (bounded
// by the leader lease), not for ctx.
//
// # Sessions
//
// A session (ID, TTL) is replicated: the grant entry creates it, its ID
// is the raft index of that entry (unique, the same on every node). Its
// deadline is not replicated: only the leader judges expiry, by its own
// clock, and replicates the verdict as an expire entry, which deletes the
// session's keys in one revision. Followers never expire anything.
// Keep-alives are log entries (type 5, changing no key and consuming no
// revision): the leader commits one, then restarts the session's
// deadline in its memory. Every node notes, by its own clock, when it
// applied each session's grant or latest keep-alive (not replicated,
// never part of Apply's results), and a node that begins leading a term
// starts each session's deadline from that moment. The entry was
// committed before any leader counted it and this node applied it after
// that, so the new deadline is never earlier than the old leader's: a
// leader change never expires sessions whose owners keep alive, and a
// session whose owner died with (or apart from) the old leader expires
// one TTL after its last keep-alive, as it would have without the leader
// change (a broker killed together with the raft leader's process is
// declared dead on time). A node that restarted or restored a snapshot
// has no such moment for a session and gives it a full TTL from when it
// first sees it as leader; so does every voter after a full restart.
// Each broker writes one keep-alive every TTL/3 (3s by default): a few
// small entries per second for a whole cluster.
//
// # Leader loss
//
// When the leader dies or is cut off, followers elect a new leader after
// ElectionTimeout (raft's randomized election). Meanwhile requests wait
// (writes and reads are retried against the new leader; watches keep
// streaming whatever the node applies). Writes in flight on the old
// leader fail with sdk.ErrUnavailable (outcome unknown). The new leader
// runs a barrier before serving reads, then starts every session's
// deadline from its last keep-alive as above. With fewer than a majority of voters alive there is no
// leader: requests fail with sdk.ErrUnavailable after LeaderWait, and the
// monitor logs "waiting for a quorum of voters" every 10 s.
//
// # Bootstrap
//
// Give every voter the same voter set (controller.quorum.voters style,
// see ParseVoters: "1@host1:19091,2@host2:19091,3@host3:19091") and its
// own NodeID. A voter whose DataDir holds no raft state calls
// BootstrapCluster with that full configuration; hashicorp/raft accepts
// identical bootstraps on all voters, so start order does not matter. A
// voter started before a majority is up waits (and logs that it waits);
// Open never blocks on the quorum; WaitLeader does, if the caller wants.
// A voter with existing state ignores Voters for membership: the
// membership is what the log says (see below).
//
// # Replacing a voter
//
// Membership changes go through the raft log and are made on the leader
// (Store.AddVoter, Store.RemoveVoter; Store.Raft() exposes the node for
// anything else). One voter at a time, so a majority stays up:
//
//  1. On the leader: RemoveVoter(3, timeout) drops the dead voter.
//  2. Start the replacement with an EMPTY DataDir, its own NodeID and
//     quorum address, and Config.Join set: a joining node never
//     bootstraps (a second bootstrap with a different voter set would
//     create a conflicting first log entry), it waits to be contacted.
//  3. On the leader: AddVoter(4, "host4:19091", timeout). The leader
//     streams it a snapshot and the log; from then on it votes.
//  4. Update controller.quorum.voters everywhere for the record; a node
//     with state ignores it (membership is what the log says).
//
// To move a voter to a new address, RemoveVoter then AddVoter with the
// same ID and the new address. TestReplaceVoter does steps 1-3.
//
// # Non-voters
//
// A node opened with Config.NonVoter (a Kafka broker with
// process.roles=broker) is not in Voters and never votes or leads: the
// quorum's size and majority are the voters' alone. It listens on its own
// QuorumAddr (a dialable address; port 0 picks one) and, from a
// goroutine it owns, asks the voters in turn over the forwarding protocol
// (/v1/join) until one, forwarding to the leader, has made it a raft
// non-voter (AddNonvoter) at that address. It never bootstraps. From then
// on the leader replicates the log to it, so it applies every entry and
// serves watches locally like a voter; writes and linearizable reads are
// forwarded to the leader. A restarted non-voter has its state and
// rejoins at once (a join at the address it already has changes
// nothing). A join naming a voter's ID is refused (ErrInvalidArgument), so
// a misconfigured node cannot take a voter's address. A non-voter that
// goes away for good stays in the configuration (the leader keeps retrying
// it, harmlessly) until RemoveVoter removes it.
//
// # The quorum port
//
// One TCP port per voter (Voters[NodeID]) carries two protocols. Every
// connection starts with one tag byte:
//
//	'R'  hashicorp/raft's NetworkTransport (msgpack RPCs), unchanged
//	'F'  the forwarding protocol: HTTP/1.1 POSTs with gob bodies,
//	     paths /v1/apply, /v1/get, /v1/list, /v1/revision, /v1/keepalive,
//	     /v1/join
//
// so a follower finds the leader's forwarding endpoint at the leader's
// raft address. Errors cross as a reply code (not found, version
// mismatch, session expired, invalid argument, unavailable, not leader,
// other) plus text, and match the sdk sentinels with errors.Is.
//
// With Config.ServerTLS and ClientTLS (the broker's
// controller.quorum.security.protocol=SSL, with its own ssl.keystore and
// ssl.truststore) the whole connection is mutual TLS, tag byte included:
// the accepting node completes the handshake (within 5 s, requiring a
// client certificate from the truststore's CAs) before it reads the tag,
// and refuses and logs a peer that fails it; the dialing node checks the
// accepting one's certificate (and host name, unless
// ssl.endpoint.identification.algorithm is "none"). A node without a
// certificate from the quorum's CA can therefore neither vote, follow the
// log, forward requests nor join as a non-voter.
//
// # Log entry format
//
// Every raft log entry of type LogCommand that this package writes:
//
//	offset  size  field
//	0       1     format   entryFormat (1)
//	1       1     type     1 write, 2 grant, 3 revoke, 4 expire,
//	                       5 keep-alive
//	2       n     body     by type, below
//
// Integers in bodies are Go varints (encoding/binary: uvarint for counts
// and lengths, zig-zag varint for signed values); a string is a uvarint
// length followed by its bytes.
//
//	write:  uvarint nconds, nconds × { string key; varint version }
//	        uvarint nops,   nops   × { 1 byte kind; string key;
//	                                   kind 1 (put) only: string value;
//	                                                     varint session }
//	        op kinds: 1 put, 2 delete (absent key: no-op),
//	                  3 delete-must-exist (absent key: ErrNotFound)
//	grant:  varint ttl nanoseconds (> 0)
//	revoke: varint session ID (fails with ErrSessionExpired if ended)
//	expire: varint session ID (no-op if ended)
//	keep-alive: varint session ID (fails with ErrSessionExpired if
//	        ended; changes no key)
//
// Trailing bytes, unknown types or kinds, and counts or lengths beyond
// the bytes present are ErrCorrupt. Apply answers a corrupt entry with
// that error on every node alike and changes nothing, so nodes never
// diverge. A write applies all of its ops at one revision or none; a
// write that changes no key (deletes of absent keys, ending a session
// without keys) consumes no revision.
//
// # Snapshot format
//
//	offset  size  field
//	0       4     magic    "VRFS"
//	4       1     format   snapshotFormat (1)
//	5       ...   uvarint index     raft index of the last applied entry
//	              varint  revision  store revision
//	              uvarint nsessions, nsessions × { varint id; varint ttl ns }
//	              uvarint nkeys,     nkeys × { string key; string value;
//	                                           varint version; varint session }
//
// Keys are in byte-wise order. hashicorp/raft's file snapshot store adds
// its own metadata and CRC-64 around this stream.
//
// # Files
//
// DataDir/raft.db holds the raft log and stable store (bbolt, via
// raft-boltdb, fsync'ed per append); DataDir/snapshots/ the two most
// recent snapshots.
//
// # Goroutines
//
// Open starts: the mux accept loop and one short-lived tag reader per
// accepted connection (mux.go), the forwarding HTTP server, the monitor
// (leader reports and session expiry), a non-voter's join loop
// (nonvoter.go), plus hashicorp/raft's own. Close
// stops and waits for all of them and closes every accepted connection.
// A Watch whose context can end registers a context.AfterFunc that the
// watch's Close deregisters.
package raft
