// Package broker is an embeddable Kafka-protocol broker: it owns the data
// directory, the metadata store, the partitions' logs and the listener, and
// serves every Kafka API it advertises through one handler table.
//
// Handlers live one file per API key, named after the key
// (00_produce.go, 01_fetch.go, ...). Each file opens with the versions it
// serves and what those versions change. The table in handlers.go is the
// single list of served APIs; ApiVersions answers from it and a test checks
// that every advertised version decodes and is answered.
//
// Two error planes, as in Kafka: a Kafka error (a topic that does not
// exist, a batch with a bad CRC) is response data, set as an error code in
// the response; a Go error returned by a handler means the connection can
// not continue (an unparseable or unsupported request) and closes it.
//
// # Listeners and authentication
//
// Every entry of listeners is served, named, with its security protocol
// (listeners.go): PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL. A TLS listener
// (core/tlsconf builds its crypto/tls config from the ssl.* keys) makes a
// verified client certificate the principal (ssl.principal.mapping.rules).
// A SASL listener requires SASL (KIP-43, KIP-152) through the
// sdk.Authenticators in Options; sasl.go holds the per-connection state
// machine, with KIP-368 re-authentication. Until a connection
// authenticates only ApiVersions, SaslHandshake (v1; v0 is refused) and
// SaslAuthenticate are served; any other request closes it. Success sets
// the connection's principal (wire.ConnInfo.Principal); a failure is
// answered, then the connection closes. A PLAINTEXT listener leaves every
// connection sdk.Anonymous.
//
// Brokers register every listener's advertised address (cluster.Endpoint)
// and answer Metadata, FindCoordinator and DescribeCluster with the
// addresses of the listener the client is connected to. Replica fetchers
// dial the inter-broker listener with its security (interbroker.go): the
// broker's keystore as client certificate, and/or SASL with
// sasl.mechanism.inter.broker.protocol and inter.broker.sasl.username.
//
// # Authorization
//
// With authorizer: acl, Handle passes every request through authorize
// (authz.go) before its handler. authzTable (authz_table.go) is Kafka's
// authorization table, one row per served API key: the resource type and
// operation it checks and a check that reads the resource names from the
// request. A check refuses the whole request with the API's
// *_AUTHORIZATION_FAILED (the handler does not run), or takes the refused
// topics or groups out of the request and merges them, with their error,
// into the handler's response (Fetch, which encodes its response itself,
// applies the merge with applyDenied before framing). Metadata,
// ListGroups and OffsetFetch of all topics drop what the principal may
// not DESCRIBE. Decisions come from core/acl, which follows /acls/ keys in
// the metadata store; CreateAcls/DescribeAcls/DeleteAcls write and read
// them. Replica fetches and follower OffsetForLeaderEpoch need
// CLUSTER_ACTION on the cluster, so the principal brokers connect with
// must be a super user. A test fails when an API is served without a row.
//
// # Data directory
//
//	<log.dirs>/
//	  meta.properties          cluster.id and node.id, written once
//	  meta/local.db            the embedded metadata store (plugins/metastore/local)
//	  <topic>-<partition>/     one partition's log (see core/log)
//
// An I/O error in any partition log takes the directory offline
// (logdir.go): every partition of it answers KAFKA_STORAGE_ERROR, Failed is
// closed, and the owner closes the broker (the daemon then exits 1), as
// Kafka halts a broker with no online log directory. Retention runs in
// the broker's maintenance loop every second, bounded by each partition's
// high watermark.
//
// # Metadata keys
//
// Topics, partition states, broker registrations and the controller are
// core/cluster's keys (/topics/<name>, /partitions/<name>/<p>, /brokers/,
// /controller; see its doc): every broker, a single node included, is a
// member of a cluster (clustermode.go) and changes topics through it. The
// broker reads /topics/ at start to open the logs, then follows what the
// cluster's watcher applies. A /topics/<name> record without "replicas"
// (written by a single node before it ran as a cluster of one) is given
// its assignment and partition states by the controller at start.
//
// # Group coordinator
//
// groups.go hosts core/group: groupHost.mu serializes the coordinator and
// the appends of its records to __consumer_offsets, so the log holds them
// in the order the state changed. groups_load.go makes the coordinator
// follow the leadership of __consumer_offsets partitions (load on gaining
// it, unload on losing it). Lock order: groupHost.mu is taken before any
// partition or log lock (a step appends while holding it) and never while
// holding one; the cluster applier only kicks the loader, which takes
// groupHost.mu itself.
//
// # Transaction coordinator
//
// txns.go hosts core/txn over __transaction_state (issue 11); txn_ops.go
// runs InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn,
// each holding the ID's busy flag from reading its state to installing
// the next one; txn_verify.go checks transactional produce requests
// (KIP-890 part 1), asking a coordinator on another broker with
// AddPartitionsToTxn v4 VerifyOnly. Lock order: txnHost.mu before partition and log
// locks (loading replays a partition under it), never taken while holding
// one; appends (persist, markers) and replication waits run without it.
// The produce check runs under a partition's leader/ISR lock and the
// log's append lock and takes no lock: it reads sync.Map mirrors of the
// coordinator state and the partitions' atomic state. txnHost.peers.mu
// guards only the client cache.
//
// # Producer IDs
//
// /producer-ids/next holds the next unallocated producer ID. A broker
// reserves a block of IDs with compare-and-set and hands them out from
// memory, so InitProducerId costs a store write once per block.
//
// # Metadata writes while the store is unreachable
//
// While this broker's lease on the metadata store has lapsed (it leads on
// through a whole-store outage, or is fenced: core/cluster, "When the
// whole store is down"), every request that would write the store is
// answered at once, before any part of it is written, with the retriable
// code a Kafka broker gives while its controller quorum is unavailable
// (a forwarded request that times out is REQUEST_TIMED_OUT; a producer
// ID block not granted is COORDINATOR_LOAD_IN_PROGRESS) and, where the
// response has one, a message saying the metadata store is unreachable:
//
//	CreateTopics, DeleteTopics, CreatePartitions      REQUEST_TIMED_OUT
//	AlterConfigs, IncrementalAlterConfigs (topics)    REQUEST_TIMED_OUT
//	ElectLeaders, AlterPartitionReassignments         REQUEST_TIMED_OUT
//	CreateAcls, DeleteAcls                            REQUEST_TIMED_OUT
//	AlterClientQuotas, AlterUserScramCredentials      REQUEST_TIMED_OUT
//	InitProducerId (a new block needed), EndTxn that  COORDINATOR_LOAD_IN_PROGRESS
//	  needs a new producer ID (epoch exhausted)
//
// Creating a topic automatically (Metadata, __consumer_offsets,
// __transaction_state) fails the same way underneath.
// InitProducerId from the broker's current block, produce, fetch, group
// and transaction requests (their state lives in Kafka logs) are served.
// franz-go and the Java client retry both codes; an idempotent producer
// started during the outage gets its producer ID once the store is back.
// Before the lease lapses (at most broker.session.timeout.ms into the
// outage) the store calls of CreateAcls, DeleteAcls, AlterClientQuotas,
// AlterUserScramCredentials and AlterConfigs are bounded by 5 s
// (storewrite.go) and answered REQUEST_TIMED_OUT (the outcome of a write
// then is unknown, as in Kafka); InitProducerId, waiting for another
// request's block reservation included, is bounded the same way and
// answered COORDINATOR_LOAD_IN_PROGRESS. So the client gets an answer
// within its own request timeout (CreateTopics, DeleteTopics,
// CreatePartitions, ElectLeaders and reassignments carry a timeout of
// their own, and the store bounds each call). TestStoreOutageRefusesMetadataWrites
// (daemon/acceptance) checks each on raft, ZooKeeper and etcd.
package broker
