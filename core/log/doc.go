// Package log is the durable, segmented log of one partition.
//
// # Directory
//
// A partition is a directory, conventionally named <topic>-<partition>,
// holding:
//
//	<base:%020d>.log          record batches, exactly as appended
//	<base:%020d>.index        sparse offset index of that segment
//	<base:%020d>.timeindex    sparse time index of that segment
//	<offset:%020d>.snapshot   producer (idempotence) state at offset
//	recovery-point.checkpoint data below this offset is fsynced
//	log-start-offset.checkpoint
//	clean-shutdown            written by Close; deleted before the first change after Open
//	cleaner-offset.checkpoint first dirty offset of compaction (not fsynced)
//	leader-epoch-checkpoint   leader epoch -> first offset (text, Kafka's format)
//	<base:%020d>.log.cleaned  compaction output being written; removed at Open
//	<base:%020d>.log.swap     compaction output committed; installed at Open
//	*.tmp                     half-written checkpoints; removed at Open
//
// base is the offset of the segment's first batch, zero padded to 20 decimal
// digits so names sort by offset. Every .index and .timeindex has a .log of
// the same base; Open deletes index files without one.
//
// # Segment file (.log)
//
// Concatenated RecordBatch v2 (magic 2) batches, byte for byte as on the
// wire after Append rewrote baseOffset (and, when asked, partitionLeaderEpoch
// and the LogAppendTime attribute, maxTimestamp and CRC):
//
//	 0        8           12                    16    17    21
//	+--------+-----------+---------------------+-----+-----+------------ - -
//	|baseOff |batchLength|partitionLeaderEpoch |magic| crc |attributes ...
//	| int64  |  int32    |       int32         |  2  |u32  | CRC32C covers
//	+--------+-----------+---------------------+-----+-----+ attributes..end
//	 batch size = 12 + batchLength; the next batch starts right after.
//
// INVARIANT: batches are whole (a torn tail exists only after a crash and
// is cut by recovery), and offsets increase: each batch's baseOffset is
// greater than the previous batch's last offset (baseOffset +
// lastOffsetDelta), the first is >= the segment base, and all are below the
// next segment's base. Relative offsets (offset - base) fit in int32 and
// positions in uint32; Append rolls before either would overflow.
//
// The file's size is exactly its batches. On Linux the active segment
// also holds disk blocks reserved past its end, about one write ahead
// (at most 1 MiB + 64 KiB; fallocate FALLOC_FL_KEEP_SIZE, prealloc.go:
// appends into reserved blocks skip ext4's per-block delayed
// allocation); they are not part of the file's size and are freed when
// the segment rolls or the log closes.
//
// # Offset index (.index)
//
// Sparse, 8-byte big-endian entries, no header, file sized to its entries:
//
//	 0            4            8
//	+------------+------------+
//	| relOffset  |  position  |   relOffset = batch baseOffset - segment base
//	|  uint32    |   uint32   |   position  = byte position of that batch
//	+------------+------------+
//
// A batch gets an entry when more than index.interval.bytes of batches were
// appended since the previous entry (the first batch of a segment never
// needs one: lookups default to position 0).
// INVARIANT: relOffset and position strictly increase; position < log size.
// Lookup: the last entry with relOffset <= target gives a position at or
// before the batch holding target; batch headers are scanned from there.
//
// # Time index (.timeindex)
//
// Sparse, 12-byte big-endian entries, written together with offset index
// entries and once more when the segment is rolled:
//
//	 0                        8            12
//	+------------------------+------------+
//	|  maxTimestamp          | relOffset  |
//	|  int64 (ms)            |  uint32    |
//	+------------------------+------------+
//
// An entry (ts, rel) says: the largest batch maxTimestamp among the batches
// up to the indexed one is ts, and rel is the first batch that reached it.
// An entry is added only when ts grew, so
// INVARIANT: ts strictly increases and relOffset never decreases.
// The last entry of a rolled segment is its max timestamp (used by
// retention.ms and MAX_TIMESTAMP without reading the segment).
//
// # Offset checkpoints (recovery-point, log-start-offset, clean-shutdown)
//
// 17 bytes, replaced atomically (write *.tmp, fsync, rename, fsync dir):
//
//	 0      4    5                  13          17
//	+------+----+------------------+-----------+
//	|"VLCK"| 1  |  offset int64    | CRC32C of |
//	|magic |ver |                  | bytes 0-12|
//	+------+----+------------------+-----------+
//
// recovery-point: every batch and index entry below offset is fsynced;
// crash recovery starts at the segment holding it. log-start-offset: the
// first readable offset after DeleteRecords or retention; the effective
// start is max(checkpoint, first segment base).
//
// # Clean-shutdown marker (clean-shutdown)
//
// Written last by Close: the log end offset and the segment table (base,
// size, largest timestamp and its offset, per segment), so that Open after
// a clean shutdown stats and reads nothing per inactive segment (byte
// layout in cleanmarker.go). Open trusts it only if its table names
// exactly the .log files present and the active segment has the recorded
// size, else it recovers. The marker stays while the log is only read; the
// first change (append, roll, truncation, deletion, compaction) deletes it
// and fsyncs the directory before changing anything, so a marker on disk
// always describes the files exactly. The 17-byte checkpoint form of
// earlier versions is still read, without a table.
//
// # Producer snapshot (.snapshot)
//
// The idempotence and transaction state after every batch below offset.
// Big-endian, version 2:
//
//	 0      4    5          9           13
//	+------+----+----------+-----------+------- - -
//	|"VLPS"| 2  | CRC32C of| producer  | entries, ascending producerID,
//	|magic |ver | bytes 9..| count u32 | then the aborted transactions
//	+------+----+----------+-----------+------- - -
//	entry:   producerID int64 | epoch int16 | n uint8 (<= 5) | n x batch |
//	         inTxn uint8 (0/1) | txnFirst int64 | coordEpoch int32
//	batch:   firstSeq int32 | lastSeq int32 | firstOffset int64 | lastOffset int64
//	aborted: count uint32 | count x (producerID int64 | firstOffset int64 |
//	         lastOffset int64 | lastStableOffset int64), ascending lastOffset
//
// inTxn/txnFirst: the producer has an open transaction whose first batch
// is at txnFirst; coordEpoch is the newest transaction coordinator epoch
// of its markers here (an older coordinator's marker is refused). The
// aborted list holds every aborted transaction whose
// ABORT marker (lastOffset) is at or above the log start offset. Version 1
// (no transaction fields, no aborted list) is still read.
//
// Written at every roll (not fsynced: the CRC rejects a torn one and an
// older snapshot or the log headers take over), at Close (fsynced), and
// by Maintain's flushes (flush.ms, the checkpoint after data-only fsyncs)
// at most every 10 s, at the offset that flush made durable (not
// fsynced), so that a crash of a flushed log rebuilds producer state from
// a recent offset rather than from the last roll.
// INVARIANT: a snapshot written by a flush names an offset at or below
// the recovery point. The three newest are kept; snapshots above the log
// end are deleted.
//
// # Transactions (txn.go)
//
// A transactional batch opens a transaction of its producer on the
// partition (if none is open); a control batch (marker) of the producer
// closes it. Markers are written by the leader (AppendMarker, one batch of
// one control record, key {version int16 0, type int16: 0 ABORT, 1
// COMMIT}, value {version int16 0, coordinatorEpoch int32}) and replicated
// like any batch. The last stable offset is min(high watermark, first
// offset of the oldest open transaction). An ABORT marker adds {producer,
// first offset, marker offset, LSO after it} to the aborted-transaction
// index, which read_committed fetches return (AbortedTxns). The index is
// kept in memory and in the producer snapshot (above), and rebuilt on Open
// from the newest snapshot plus the markers after it (their control type
// is the one record body recovery reads), so recovery stays bounded by the
// bytes after the last snapshot. Not Kafka's per-segment .txnindex file:
// entries leave the index when the log start passes their marker, or when
// compaction removes the marker (below).
//
// # Leader-epoch checkpoint (leader-epoch-checkpoint)
//
// Kafka's text format, ASCII decimal, one item per line, each line ended
// by "\n", replaced atomically and fsynced on every change:
//
//	0                 version
//	3                 number of entries
//	0 0               "<epoch> <startOffset>": the first offset written
//	2 150               in that leader epoch
//	5 420
//
// INVARIANT: epochs and start offsets both strictly increase; no entry
// starts at or beyond the log end offset after Open, and the first starts
// at or after the log start offset (moved up to it when retention or
// DeleteRecords passes it). A file breaking the format or the order is
// corrupt and rebuilt from the batch headers, as is a missing one.
//
// Entries are added (Kafka's assign rule: a new epoch, or an earlier start
// for the latest one, replaces every trailing entry whose epoch or start
// is not below it) by Append with AppendOptions.LeaderEpoch >= 0, by
// AppendReplica from each batch's partitionLeaderEpoch, and by
// AssignEpochStart when a replica becomes leader. The file is written
// before the batches that need it, and trimmed after Truncate cuts the
// segments, so a crash leaves at most entries past the log end, which Open
// drops. For the same reason an entry that AssignEpochStart adds at the
// log end (a leader taking over; every new partition) is kept in memory
// only, and written with the epoch's first batch. EndOffsetForEpoch answers OffsetForLeaderEpoch from it (KIP-101):
// the largest epoch <= the requested one and the start of the next entry,
// or the log end offset for the latest epoch.
//
// # Recovery
//
// With the clean-shutdown marker, Open reads only the active segment's
// index and the batch headers after its last entry (not even the index of
// an active segment within one index interval), and not the recovery
// point. Without it, every batch from the recovery point onward is checked
// (header, offsets, CRC32C): in the segment holding the recovery point,
// the batches below it are taken as the segment's index files describe
// them (both are fsynced before the recovery point moves past them), and
// checking starts at the last indexed batch below it; if that entry does
// not name a batch there, at the segment's start. The first bad or torn
// batch truncates its segment and deletes all later ones; scanned segments
// get fresh indexes; the result is fsynced, the recovery point advanced,
// and the producer snapshot and clean-shutdown marker written as Close
// writes them, so a second crash before a change scans nothing. Producer
// state is the newest snapshot at or below the log end plus the batch
// headers after it. Segments below the recovery point are trusted; their
// indexes load on first use and are rebuilt from batch headers if they fail
// the invariants above.
//
// # Timestamps
//
// OffsetForTime and MaxTimestamp follow Kafka's ListOffsets: segment max
// timestamps and the time index find the first candidate batch from batch
// headers; only that one batch is decoded (record.Records) to return the
// exact record offset and timestamp.
//
// # Durability
//
// Append writes to the page cache. flush.messages=N fsyncs the segment data
// once N records are unsynced (N=1: before Append returns), before the
// append is published: records whose fsync failed are never visible.
// Maintain flushes everything and advances the recovery point when
// flush.ms has passed, after a roll (as Kafka does, so a crash rescans at
// most the active segment) and periodically after data-only fsyncs. Flush
// and Truncate exclude each other (flushMu), so the recovery point it
// checkpoints covers only bytes its fsyncs saw, never bytes a concurrent
// truncation and re-append put at those offsets.
//
// INVARIANT: log start <= log end; recovery point <= synced offset <= log
// end. Retention (ApplyRetention, given the partition's high watermark)
// deletes only segments wholly below the high watermark, so it never moves
// the log start past it.
//
// # Storage failures
//
// A failed write or fsync takes the log offline, as Kafka takes a log
// directory offline: the first failure is kept and every later Append,
// Read, Flush and Truncate returns it (wrapping ErrStorage); the page cache
// may hold bytes the disk lost, so nothing more is served until a restart
// recovers the files. Config.OnStorageError tells the owner (the broker
// takes the whole directory offline with TakeOffline and stops).
//
// # Compaction (cleanup.policy=compact)
//
// Log.Clean (run by a Cleaner goroutine the broker owns) keeps the latest
// record per key. The cleanable range is the inactive segments that lie
// wholly below the recovery point and, with min.compaction.lag.ms, whose
// max timestamp is old enough; the active segment is never touched. A
// pass runs when dirty bytes (from the cleaner checkpoint on) reach
// min.cleanable.dirty.ratio of the cleanable bytes, when the first dirty
// segment is older than max.compaction.lag.ms, or when a kept tombstone's
// delete horizon has passed.
//
// A pass maps each key of the dirty range (whole batches, in offset
// order) to its latest offset in a bounded map of 128-bit key digests; it
// stops before the batch that would overflow the map, and the next pass
// resumes there (cleaner-offset.checkpoint). It then rewrites every
// cleanable segment up to and including the one where mapping stopped,
// consecutive segments merged into one while their sizes sum to at most
// segment.bytes. A record survives unless a later offset of its key is
// mapped, its key is null, or it is a tombstone whose delete horizon has
// passed. Offsets never change:
//
// INVARIANT: a rewritten batch keeps its baseOffset, lastOffsetDelta,
// maxTimestamp, producer fields and codec; its records keep their offset
// deltas (so deltas may have gaps) and are recompressed with the codec.
// A batch left with no records is dropped, except its producer's last
// batch (kept for the sequence, as Kafka does) and the last batch of each
// cleaned segment, which are written as empty uncompressed batches
// (numRecords 0), so a segment keeps its last offset and a fetch inside a
// cleaned range always returns a batch that moves the consumer on.
//
// Transactions, as Kafka's cleaner: the cleanable range ends at the first
// offset of the oldest open transaction; an aborted transaction's records
// never shadow a key's committed record and are all removed. A pass reads
// from the log start, so at a marker it has seen every batch of that
// transaction: while one of them is kept, the marker is copied unchanged
// (without it, a rebuild of producer state would read the batch as an
// open transaction). A marker whose transaction has nothing left gets a
// delete horizon like a tombstone and goes in a pass after it; an ABORT
// marker's aborted-index entry goes with it (before the swap: the records
// went in an earlier pass). A producer's last batch and a cleaned
// segment's last batch stay regardless.
//
// Tombstones follow KIP-534: the first pass that keeps a tombstone
// rewrites its batch with attribute bit 6 set and baseTimestamp = the
// delete horizon (pass time + delete.retention.ms), record timestamp
// deltas rebased so every record keeps its timestamp. A later pass at or
// after the horizon drops the tombstone. So a tombstone survives at least
// delete.retention.ms after the cleaner first passed it.
//
// Swap, for a group of old segments whose first base is B; Open finishes
// or undoes a crash at any point:
//
//  1. write B.log.cleaned and fsync it;    crash: .cleaned deleted at Open
//  2. rename it to B.log.swap, fsync dir;  from here Open completes 3-5
//  3. publish the new segment in memory (old ones marked deleted: readers
//     holding them retry; open Slices keep the old files);
//  4. delete the old segments' .index/.timeindex and .log files other
//     than B.log;
//  5. rename B.log.swap over B.log, fsync dir;
//  6. write the new index files (a crash leaves them missing: rebuilt
//     from headers on first use).
//
// At Open, a B.log.swap is scanned (it was fsynced before being named) for
// its next offset N; every index file of B and every file of a segment
// with base in (B, N) is deleted, then the swap file is renamed to B.log.
// Old segments of the group above N held only removed records; keeping
// them is harmless.
//
// # Concurrency
//
// Lock order (see Log): cleanMu, adminMu, appendMu, flushMu, mu, segment
// locks; the epoch cache's locks come last. Truncate and
// TruncateFullyAndStartAt hold adminMu, appendMu and flushMu.
//
// With the invariants build tag (core/invariant) the INVARIANT comments of
// this package are checked: batch offsets and positions increasing within a
// segment, index entries increasing, segments in order, the epoch cache
// strictly increasing, the offset order above, retention below the high
// watermark.
//
// One Append at a time; Reads run in parallel and do their I/O without any
// lock the appender needs. Append writes past the published segment size,
// then publishes the new size and index entries and the log end offset, so
// a reader sees only whole batches. Files are reference counted: a Slice
// keeps its descriptor (and so the bytes of a deleted file) until Close.
// Inactive segments open on demand and Maintain closes those idle for a few
// seconds with no live Slice.
package log
