// Package group is the group coordinator: classic consumer groups
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, with assignment done by
// the group leader client), KIP-848 consumer groups
// (ConsumerGroupHeartbeat, with assignment done here by an sdk.Assignor),
// and committed offsets.
//
// # Shape
//
// Coordinator is a state machine fed by events, in the manner of
// etcd-io/raft: each request method and Tick take the current time and
// return an Output — records to append to __consumer_offsets and replies
// to send. It does no I/O, starts no goroutines and reads no clock, so its
// tests are tables. The caller (core/broker) serializes calls, appends the
// records, calls Apply once they are in the log, and only then sends the
// replies marked Durable (offset commits, the leader's SyncGroup, group
// deletion). A JoinGroup or SyncGroup that must wait for other members is
// answered in the Output of a later step; the caller matches replies to
// requests by the Waiter it passed in. NextDeadline says when Tick next
// has work (session expiry, rebalance and initial delays, revocation
// timeouts, offsets retention).
//
// # Coordinator placement
//
// A group lives in partition PartitionFor(group, offsets.topic.num.partitions)
// of __consumer_offsets: abs(Java String.hashCode(group)) % partitions;
// the leader of that partition is the group's coordinator.
//
// # Loading and unloading
//
// A coordinator serves only the groups of the partitions it has loaded.
// When the caller's broker becomes leader of a partition (or leader again
// at a newer leader epoch) it calls BeginLoad: from then on every request
// for a group of that partition is answered COORDINATOR_LOAD_IN_PROGRESS.
// The caller replays the partition's records into the returned Load
// (outside its lock: a Load is state of its own, never served) and calls
// FinishLoad, which installs the groups if the partition is still loading
// at that epoch, with fresh member sessions. When the broker stops leading
// the partition it calls Unload: the partition's groups are dropped with
// their timers, and requests waiting on them are answered NOT_COORDINATOR.
// A group of a partition neither loading nor loaded is answered
// NOT_COORDINATOR by every group API; the multi-group ones (OffsetFetch
// v8+, DescribeGroups, DeleteGroups, ConsumerGroupDescribe) decide per
// group, and ListGroups answers COORDINATOR_LOAD_IN_PROGRESS while any
// partition loads, as Kafka does.
//
// # Records in __consumer_offsets
//
// Kafka's own key and value schemas (kmsg encodes them; all integers are
// big-endian, strings are int16 length + bytes):
//
//	offset commit   key   = version:int16 (1)  group:string  topic:string  partition:int32
//	                value = version:int16 (3)  offset:int64  leader_epoch:int32
//	                        metadata:string  commit_timestamp:int64
//	                        (version 1 adds expire_timestamp:int64 after
//	                        commit_timestamp and has no leader_epoch; it is
//	                        written for commits with an explicit retention)
//	group metadata  key   = version:int16 (2)  group:string
//	                value = GroupMetadataValue v3: protocol_type, generation,
//	                        protocol, leader, current_state_timestamp and
//	                        the members (member ID, instance ID, client ID,
//	                        client host, rebalance and session timeouts,
//	                        subscription, assignment)
//
// A null value is a tombstone: an offset deleted (OffsetDelete,
// DeleteGroups, retention) or a group deleted. The topic is compacted, so
// the latest record per key is the state; Replay applies records in log
// order and rebuilds every group and offset. A loaded classic group with
// members is Stable with fresh sessions, so members that keep
// heartbeating stay in their generation across a broker restart.
//
// KIP-848 groups are persisted too. kmsg has no schemas for Kafka's
// ConsumerGroup* records, so Vltava writes its own, with key versions far
// above Kafka's (1001-1004) so the two cannot be confused. Keys are
// version:int16 group:string, plus member:string for per-member records;
// values start with value_version:int16 (0). Arrays are int32 count +
// elements; partitions are [topic_id:uuid(16 bytes) partitions:[int32]],
// sorted by topic ID and partition:
//
//	group       key 1001 group                 value 0: epoch:int32
//	            assignment_epoch:int32 assignor:string
//	            subscribed:[topic:string partitions:int32]
//	            (Kafka's ConsumerGroupMetadata, PartitionMetadata and
//	            TargetAssignmentMetadata in one)
//	member      key 1002 group member          value 0: instance_id:string
//	            rack:string client_id:string client_host:string
//	            rebalance_timeout_ms:int32 topic_names:[string]
//	            regex:string server_assignor:string  (empty string = none)
//	target      key 1003 group member          value 0: partitions
//	current     key 1004 group member          value 0: member_epoch:int32
//	            previous_epoch:int32 left_static:bool(int8)
//	            assigned:partitions revoking:partitions
//
// Each step writes only the records whose value changed since the last
// append (and tombstones for members gone), and the heartbeat reply is
// durable when it wrote anything. Replay rebuilds members with fresh
// sessions, so members that keep heartbeating stay at their epoch with
// their assignment across a broker restart. Deleting the group tombstones
// members' records first and the group record last; a group record
// tombstone turns the group back into a (classic, empty) holder of its
// offsets.
//
// A static member that leaves with epoch -2 keeps its assignment (and
// nobody else gets those partitions) until its session times out; its
// instance rejoining with epoch 0 under a new member ID takes over the
// old member's epoch, target and assignment without a new group epoch.
//
// # Offsets retention
//
// offsets.retention.minutes counts from the later of the commit and the
// moment the group became empty; only groups without members lose
// offsets. An empty group without offsets is deleted (tombstoned) once the
// retention has passed since it became empty.
package group
