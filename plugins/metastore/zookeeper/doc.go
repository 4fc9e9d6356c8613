// Package zookeeper is an sdk.MetadataStore on a ZooKeeper ensemble
// (github.com/go-zookeeper/zk). ZooKeeper gives compare-and-set on znode
// versions, atomic multi-ops, ephemeral znodes and one-shot watches; the
// contract wants one revision counter, exact watch history from a
// revision and sessions whose keys vanish at one revision. The plugin
// builds the second on the first with a revision znode that serialises
// writes and a change log that watches read.
//
// # Key layout
//
// Everything lives under the chroot of zookeeper.connect
// ("h:p,h:p/chroot"; /vltava if none is given):
//
//	<chroot>/rev              no data; its data version IS the store revision
//	<chroot>/kv/<name>        one znode per key: a record (below)
//	<chroot>/log/<rev>        change log: one znode per revision, named by the
//	                          revision in 20 zero-padded digits; an entry (below)
//	<chroot>/compact          8 bytes: log entries at and below this revision
//	                          may be gone (uint64 big-endian)
//	<chroot>/sessions/<id>    one znode per live session (decimal ID); its
//	                          children are the names of the keys it owns
//	<chroot>/live/s-<seq>     ephemeral, created by the ZooKeeper session of the
//	                          store instance that granted the session; the
//	                          session ID is seq+1
//
// <name> is the key with every byte outside [A-Za-z0-9-_.~] (and a
// leading '.') written as %XX, so any key is one znode name and List is a
// children listing of kv filtered by prefix. Keys are flat: "a/b" is the
// znode kv/a%2Fb, not a child of kv/a.
//
// A record (the data of kv/<name>):
//
//	offset  size  field
//	0       1     format    1
//	1       8     version   revision of the key's last write, uint64 big-endian
//	9       8     session   owning session ID, uint64 big-endian; 0 = persistent
//	17      n     value
//
// A log entry (the data of log/<rev>), every event of one write:
//
//	0       1     format    1
//	1       4     count     uint32 big-endian
//	then count times:
//	        1     type      1 put, 2 delete
//	        4     key length, then the key
//	        8     session   (put)
//	        4     value length, then the value (put; 0 for a delete)
//
// # Writes and revisions
//
// A write (Put, Delete, Txn, the end of a session with keys) syncs, reads
// the rev znode's data version v and the keys it touches, checks its
// conditions, and commits one multi: set rev at version v (so the
// revision becomes v+1), the key changes (each checked against the
// znode version it read), the sessions index changes, and create
// log/<v+1>. If anything else committed meanwhile, the rev op fails and
// the write reads again: all writes are serialised on the rev znode, the
// conditions it checked still hold when it commits, and revisions are
// dense. Revisions are not zxids: session creation and other clients
// consume zxids, the contract needs a counter that only its own writes
// move. (ZooKeeper's data version is an int32: a store takes 2^31 writes.)
// Get and List sync first, so they see every write that returned before
// them through any server; List reads the revision before and after the
// keys and reads again if they differ.
//
// # Sessions
//
// GrantSession creates live/s-<seq> as an ephemeral, sequential znode of
// the store instance's ZooKeeper session, and sessions/<id>. A put with a
// session checks in its multi that live/<id> exists (else
// ErrSessionExpired) and adds the key to sessions/<id>. The store session
// ends in one of two ways, both followed by one write that deletes its
// keys and its index znode at one revision (a session without keys ends
// without a revision):
//
//   - its TTL passes without a KeepAlive (judged by the granting instance:
//     it deletes live/<id> itself), or RevokeSession;
//   - the ZooKeeper session of the granting instance ends (the broker
//     crashed, was partitioned away or closed): ZooKeeper deletes the
//     ephemeral live/<id>, and every store instance's orphan loop, which
//     watches live/, ends the sessions whose live znode is gone.
//
// So a broker's death is seen when its ZooKeeper session expires
// (session.timeout, 18 s by default as Kafka's zookeeper.session.timeout.ms;
// the daemon passes broker.session.timeout.ms unless
// zookeeper.session.timeout.ms is set), and a store session's TTL is at
// least that timeout. KeepAlive is a round trip that finds live/<id>: its
// reply proves ZooKeeper heard from the instance's session just now. When
// this instance's own ZooKeeper session expires, every session it granted
// is over and KeepAlive reports ErrSessionExpired; without a reply it
// reports ErrUnavailable (core/cluster then fences the broker before the
// TTL can run out). A session can only be kept alive through the instance
// that granted it; any other instance reports ErrSessionExpired.
//
// # Watches
//
// A watch reads log/<next>; when the entry does not exist yet it sets a
// ZooKeeper exists-watch on exactly that znode and waits for it to fire,
// then reads it and moves to next+1. A ZooKeeper watch fires once, but
// the position is the revision, not the watch: re-arming (after the
// event, a reconnect or a new ZooKeeper session) cannot skip or repeat a
// revision. The log keeps log.retention revisions (10000 by default);
// a pruner raises compact and deletes older entries. A watch that needs
// a pruned entry ends with sdk.ErrCompacted and a log line; the watcher
// lists again and watches from there.
//
// # Security
//
// auth.digest "user:password" authenticates with ZooKeeper's digest
// scheme, and every znode the store creates gets the ACL digest:user:all
// and nothing for anyone else: the metadata is neither world-readable nor
// world-writable. tls.* keys dial the ensemble's secureClientPort. SASL
// (Kerberos, DIGEST-MD5) is not supported by the client library.
//
// # When ZooKeeper is down
//
// Requests fail with sdk.ErrUnavailable after request.timeout (10 s)
// while the client reconnects on its own; an interrupted write's outcome
// is unknown, as the contract allows. A watch keeps its position and
// resumes after a reconnect; it ends with ErrUnavailable if the ensemble
// stays unreachable longer than a session timeout. While the client is
// disconnected the store's local TTLs do not run out (no keep-alive can
// arrive, whether the broker lives or not), and when the client gets its
// ZooKeeper session back every local session gets a full TTL again, as
// etcd extends its leases: a ZooKeeper that restarts (it restores its
// sessions with fresh timeouts) ends no store session, so brokers keep
// their registrations. If ZooKeeper expired the instance's session
// instead (the instance was cut off while the ensemble served others),
// its store sessions end (KeepAlive reports ErrSessionExpired, so the
// broker stops acting as leader) and the orphan loop of any instance
// deletes their keys. During a whole-store outage brokers lead on
// (core/cluster, "When the whole store is down"); daemon/acceptance
// TestStoreOutage checks that produce and fetch go on, metadata changes
// are refused, no leader is elected and no acknowledged write is lost
// (8 s by default, 30 s on ZooKeeper and etcd with VLTAVA_STORE_OUTAGE=1).
//
// # Goroutines and locks
//
// Open starts three goroutines owned by the Store: the expiry loop (local
// TTLs), the orphan loop (sessions whose live znode is gone) and the log
// pruner. Each request runs its ZooKeeper calls on a goroutine of its own
// (the client takes no context) that Close waits for; a WatchStream owns
// one goroutine that its Close (or the store's) stops and waits for; its
// ZooKeeper calls go through the same bounded request goroutines, so a
// hung connection delays Close by nothing.
// Store.mu guards the session tables and the closed flag; nothing else
// is held while it is, and it is never held across a ZooKeeper call.
package zookeeper
