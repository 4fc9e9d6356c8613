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
// # Authentication
//
// A SASL_PLAINTEXT listener requires SASL (KIP-43, KIP-152) through the
// sdk.Authenticators in Options; sasl.go holds the per-connection state
// machine. Until a connection authenticates only ApiVersions,
// SaslHandshake (v1; v0 is refused) and SaslAuthenticate are served; any
// other request closes it. Success sets the connection's principal
// (wire.ConnInfo.Principal); a failure is answered, then the connection
// closes. A PLAINTEXT listener leaves every connection sdk.Anonymous.
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
// Topics are kept in the metadata store under /topics/<name> as JSON:
//
//	{"id":"<32 hex digits>","partitions":3,"configs":{"retention.ms":"1000"}}
//
// The broker loads them at start and writes them on CreateTopics,
// DeleteTopics, CreatePartitions and config changes, with compare-and-set
// on the key's version so two writers can not both win.
//
// # Producer IDs
//
// /producer-ids/next holds the next unallocated producer ID. A broker
// reserves a block of IDs with compare-and-set and hands them out from
// memory, so InitProducerId costs a store write once per block.
package broker
