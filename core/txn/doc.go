// Package txn is the transaction coordinator's state machine (KIP-98), free
// of I/O like core/group: the broker (core/broker/txns.go) serializes calls,
// persists each new state to __transaction_state before acting on it, and
// writes the transaction markers the state asks for.
//
// A transactional ID lives in partition PartitionFor(id, partitions) of
// __transaction_state (Java's String.hashCode, as Kafka and the group
// coordinator use); its coordinator is that partition's leader.
//
// # Records
//
// One record per state change, in Kafka's layout so that Kafka tooling can
// read the topic: key TxnMetadataKey v0 {version int16 = 0, transactional
// ID string}; value TxnMetadataValue v0 {producer ID int64, producer epoch
// int16, timeout ms int32, state int8, topics [topic string, partitions
// [int32]], last update ms int64, start ms int64}. A null value is a
// tombstone: the ID expired (Txn.Expired, transactional.id.expiration.ms:
// no open transaction and no change for that long). The newest record per key wins on load.
// A state with KIP-890 part 2 fields is written as TxnMetadataValue v1
// (flexible), which adds them as tagged fields: PreviousProducerId (tag
// 0), NextProducerId (tag 1), ClientTransactionVersion (tag 2, 2 when the
// transaction was ended by EndTxn v5+).
//
// # States
//
//	Empty --AddPartitions--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
//	                                 --EndTxn(abort)/timeout/InitProducerId--> PrepareAbort --markers--> CompleteAbort
//
// Complete* and Empty accept a new transaction. A Prepare* state is
// written before any marker, so a coordinator that loads it (after a
// failover) finishes the markers: no transaction is left half committed.
// InitProducerId bumps the epoch (fencing the previous instance, whose
// requests then get PRODUCER_FENCED); when it finds an open transaction it
// aborts it first under the bumped epoch.
//
// # KIP-890 part 2
//
// EndTxn v5+ bumps the epoch at every end: Prepare* and its markers carry
// epoch+1, which the client continues with, so a delayed EndTxn of an
// ended transaction carries a stale epoch and cannot end the next one. A
// retry (same outcome, the epoch before the bump) succeeds. An epoch that
// would overflow gets a new producer ID at epoch 0 instead (NextProducerId
// while the markers, still under the old ID, are written;
// PreviousProducerId afterwards, for retries).
package txn
