// Package acceptance holds the acceptance tests of the single-node broker.
// It has no library code: every test builds ./daemon once (through
// daemontest), starts real vltavad processes on loopback ports with
// temporary data directories, and talks to them with real clients —
// franz-go (kgo, kadm), sarama, the kcat binary and raw TCP sockets.
//
// The tests cover:
//
//   - clients_test.go: each client produces records of mixed sizes with
//     every codec (none, gzip, snappy, lz4, zstd) and reads back exactly
//     what it and the other clients wrote: offsets, keys, values, headers
//     and timestamps.
//   - crash_test.go: kill -9 while an acks=all producer writes to a
//     flush.messages=1 topic; every acknowledged record survives restart
//     at its offset, and timestamp and offset lookups still answer as
//     Kafka defines.
//   - torn_test.go: a torn, padded or bit-flipped tail of the last segment
//     after kill -9 is cut back to an intact prefix, and appends continue
//     right after it.
//   - retention_test.go: segments roll at log.segment.bytes, retention
//     deletes the oldest whole segments, and ListOffsets answers from the
//     segments that remain.
//   - badinput_test.go: oversized frames, garbage requests and a produce
//     with a bad CRC get a clean close or a Kafka error code and a log
//     line, and the daemon keeps serving.
//   - groups_test.go (with groups_member_test.go, the member process):
//     franz-go members with every balancer, classic and KIP-848, each a
//     separate OS process (the test binary re-executed), join and leave
//     one by one and one is kill -9ed; every record is consumed, no
//     partition ever has two owners, and handovers resume at the commit.
//   - groups_clients_test.go: sarama's consumer group and kcat -G share a
//     group; DeleteGroups and OffsetDelete through kadm, across restarts.
//   - groups_restart_test.go: classic and KIP-848 groups keep their
//     members, epoch and offsets across a clean and a kill -9 restart.
//   - compat_test.go (with compat_security_test.go and
//     compat_kafkajs_test.go): the client compatibility matrix,
//     conformance/docs/client-compatibility.md — franz-go, sarama, kcat,
//     segmentio/kafka-go and kafkajs against codecs, consuming,
//     idempotence, transactions, groups, SASL PLAIN/SCRAM/GSSAPI (a test
//     MIT KDC), TLS, client certificates and SASL_SSL. kafkajs runs
//     testdata/kafkajs/driver.js with node; its locked packages are
//     installed with `npm ci` once into the user cache directory.
//   - txn_matrix_test.go (with txn_pipeline_member_test.go, the member
//     process): issue 11's kill -9 matrix — franz-go GroupTransactSession
//     pipelines copy an input topic to an output topic on three brokers
//     while the leaders of an input, an output, a __consumer_offsets and a
//     __transaction_state partition and a pipeline member are kill -9ed
//     and restarted; read_committed, the output holds every input record
//     once, in order per key (VLTAVA_TXN_MATRIX_LONG=1: each fault in its
//     own cluster, three times).
//
// kcat, node/npm and MIT Kerberos are optional: without them (Debian
// packages "kcat", "nodejs" and "npm", "krb5-kdc" and
// "krb5-admin-server") their parts skip or are "not run", and say so. Under -short the record counts shrink (100,000 records per
// client become 10,000).
package acceptance
