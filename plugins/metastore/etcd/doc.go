// Package etcd is an sdk.MetadataStore on an etcd v3 cluster
// (go.etcd.io/etcd/client/v3). etcd already has the contract's shape: one
// revision counter, compare-and-set on mod revisions, multi-key
// transactions, leases and watches from a revision. The plugin maps one
// to the other and adds nothing of its own; everything lives in etcd.
//
// # Key layout
//
// A store key k is the etcd key Prefix + "/" + k, with Prefix "/vltava"
// by default (config key prefix). Values are stored as given. List(p) is
// a range read of Prefix/p with etcd's prefix option, sorted by key as
// etcd returns it. Nothing else is written: no index, no bookkeeping
// keys, so etcdctl get --prefix /vltava/ shows the whole store.
//
// # Revisions and versions
//
// A key's Version is its etcd mod revision; a response's Revision is the
// etcd header revision. etcd's revision is cluster-wide, so writes outside
// the prefix (another application on the same etcd) also advance it:
// versions still increase strictly and stay unique, they just skip
// numbers. Conditions compile to etcd comparisons: MustNotExist is
// create_revision = 0, version n is mod_revision = n. Put, Delete and Txn
// are each one etcd transaction; a failed comparison is ErrVersionMismatch.
//
// # Sessions
//
// A session is an etcd lease: GrantSession is LeaseGrant (TTL rounded up
// to whole seconds; etcd raises it to its minimum of about 1.5 election
// timeouts, and the granted TTL is what etcd reports), KeepAlive is one
// LeaseKeepAlive, RevokeSession is LeaseRevoke. Ephemeral keys are put
// with the lease; when the lease expires (judged by the etcd leader's
// clock) or is revoked, etcd deletes them in one revision and watchers
// see the deletes. A Put without a lease detaches the key from its lease.
// A broker that dies stops keeping its lease alive; its keys vanish one
// TTL later.
//
// # Watches
//
// Watch is an etcd watch on the prefix from FromRevision+1 (for "from
// now", the current revision is read first, so a write after Watch
// returns is never missed). etcd delivers every event in revision order.
// If the start revision was compacted (etcd's --auto-compaction, or
// Compact), the stream ends with sdk.ErrCompacted and a log line; the
// watcher (core/cluster) lists again and watches from the listing's
// revision, which is the resynchronisation the contract prescribes.
// Compact compacts etcd itself, which is cluster-wide: it also drops the
// history of keys outside the prefix. The plugin never compacts on its
// own.
//
// # When etcd is down
//
// Every request carries etcd's require-leader flag and the plugin's
// request timeout (request.timeout, 10 s): without a quorum, requests fail
// with sdk.ErrUnavailable rather than hang, and watches end with
// ErrUnavailable (the watcher re-watches from its last revision once etcd
// is back). Leases keep running on the etcd side: if the outage is longer
// than a session's TTL, the new leader expires the lease when it comes
// back (etcd extends leases across a leader change, so an outage alone
// does not expire them), and KeepAlive then reports ErrSessionExpired.
// The client fails over between the endpoints on its own. During a
// whole-store outage brokers lead on (core/cluster, "When the whole store
// is down"), and their leases outlive it; daemon/acceptance
// TestStoreOutage (VLTAVA_STORE_OUTAGE=1) checks that produce and fetch
// go on through 30 s without etcd, metadata changes are refused, no
// leader is elected and no acknowledged write is lost.
//
// # Security
//
// username/password use etcd's user auth (the plugin then holds a token
// the client refreshes); tls.ca.file, tls.cert.file, tls.key.file,
// tls.server.name and tls.insecure.skip.verify configure TLS (client
// certificates for etcd's --client-cert-auth).
//
// # Goroutines
//
// The etcd client owns its connection and watch goroutines; Close closes
// it and waits. A WatchStream holds no goroutine of its own: Recv reads
// the client's watch channel, Close cancels the watch's context.
package etcd
