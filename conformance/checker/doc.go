// Package checker records the operations a conformance scenario performs
// against a Kafka-protocol system and finds anomalies in that history, in
// the manner of Jepsen's Kafka checker.
//
// # History file
//
// A history is a file of JSON lines, one [Op] per line, appended by a
// [Recorder] as operations happen. Several recorders (a producer and a
// consumer, or two producers) may write separate files; [ReadFiles] merges
// them and orders the merged history by Time. Each operation is an
// invocation followed later by its completion with the same ID:
//
//	{"id":7,"proc":"p0","type":"invoke","f":"send","time":120,"topic":"t","partition":0,"value":"p0-7"}
//	{"id":7,"proc":"p0","type":"ok","f":"send","time":410,"topic":"t","partition":0,"offset":6,"value":"p0-7"}
//	{"id":9,"proc":"c0","type":"ok","f":"poll","time":900,"topic":"t","reads":[{"partition":0,"offset":6,"value":"p0-7"}]}
//
// type is one of invoke, ok, fail (the operation definitely did not take
// effect) and info (unknown: a timeout, acks=0). f is send, poll, commit,
// assign or end-txn. A transactional send carries "txn", the name of its
// transaction (unique per transaction); an end-txn operation carries the
// same name and, as value, "commit" or "abort" (a commit that definitely
// failed aborts). A poll made under read_committed carries
// "isolation":"read_committed":
//
//	{"id":3,"proc":"p","type":"ok","f":"send","time":50,"topic":"t","partition":0,"offset":0,"value":"p-t1-0","txn":"p-t1"}
//	{"id":4,"proc":"p","type":"ok","f":"end-txn","time":90,"partition":0,"offset":-1,"value":"commit","txn":"p-t1"}
//
// time is nanoseconds since the recorder's epoch; recorders made from
// one [Clock] share it, so real-time order between processes is
// meaningful.
//
// # Anomalies
//
// [Check] reports, by name:
//
//   - lost-write: a send was acknowledged at offset o, its value was never
//     read, yet some read of that partition reached past o.
//   - unseen: a send was acknowledged but its value was never read and no
//     read reached its offset. Not a violation by itself: a scenario ends
//     with a final read so that an unseen write is told apart from a lost
//     one.
//   - duplicate: one value appears at more than one offset.
//   - inconsistent-offsets: one offset of a partition holds two different
//     values (between reads, or between a read and an acknowledgement).
//   - non-monotonic-poll: one consumer read an offset of a partition not
//     above the offset it read before in that partition, without an
//     assign operation in between.
//   - non-monotonic-send: one producer's acknowledged offsets in a
//     partition do not rise in the order it invoked the sends.
//   - reordering: send A was acknowledged before send B was invoked (real
//     time) but B has the lower offset in the same partition.
//   - aborted-read: a read returned a value whose send definitely failed,
//     or a read_committed poll returned a value of an aborted transaction.
//   - dirty-read: a read_committed poll returned a value of a transaction
//     before that transaction's commit was requested.
//   - torn-transaction: a read_committed reader read part of a committed
//     transaction, and read past the offsets of the rest without them.
//   - write-cycle: committed transactions order each other in a cycle
//     (G0; for transactions that only write, also G1c): in each partition,
//     a committed transaction's record directly followed by another
//     committed transaction's record orders the first before the second.
//     Kafka's protocol does not isolate writes, so transactions that
//     overlap in time may form one; transactions that do not overlap
//     must not.
//
// Sends of an aborted transaction are counted in Report.Aborted, not
// Acked, and are never unseen or lost; sends of a transaction whose end
// is unknown are provisional and never unseen either.
package checker
