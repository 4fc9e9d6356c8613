// Package record reads, checks and builds Kafka RecordBatch v2 batches
// (magic 2), the unit produce requests carry, segments store and fetch
// responses return unchanged.
//
// # Batch layout
//
// All integers are big-endian. The CRC is CRC32C (Castagnoli) over bytes
// 21 to the end of the batch, so baseOffset, batchLength and
// partitionLeaderEpoch can be rewritten without recomputing it.
//
//	offset size field
//	     0    8 baseOffset           first record's offset (producers send 0)
//	     8    4 batchLength          bytes after this field: total size - 12
//	    12    4 partitionLeaderEpoch set by the leader (producers send -1)
//	    16    1 magic                2
//	    17    4 crc                  CRC32C of bytes [21, end)
//	    21    2 attributes           see below
//	    23    4 lastOffsetDelta      last record's offset - baseOffset
//	    27    8 baseTimestamp        first record's timestamp (ms)
//	    35    8 maxTimestamp         largest record timestamp, or broker
//	                                 time under LogAppendTime
//	    43    8 producerId           -1 when not idempotent
//	    51    2 producerEpoch        -1 when not idempotent
//	    53    4 baseSequence         first record's sequence, -1 if none
//	    57    4 numRecords           records that follow
//	    61    - records              numRecords records, compressed as a
//	                                 whole when the codec is not none
//
// Attributes (int16):
//
//	bits 0-2  codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (5-7 unsupported)
//	bit  3    timestamp type: 0 CreateTime, 1 LogAppendTime
//	bit  4    transactional
//	bit  5    control batch (transaction markers; never from clients)
//	bit  6    delete horizon set (compaction, KIP-534)
//	bits 7-15 unused, zero
//
// Compressed records are the concatenated records below compressed as one
// stream: a gzip stream, snappy (raw, or in snappy-java's xerial framing:
// "\x82SNAPPY\x00", int32 version, int32 compatible version, then blocks
// of int32 length + raw snappy block), an LZ4 frame, or a zstd frame.
//
// # Record layout
//
// Varints are zigzag-encoded LEB128 as in protobuf: "varint" fields are
// int32 (at most 5 bytes), "varlong" fields int64 (at most 10 bytes). A
// byte-string length of -1 means null.
//
//	length         varint   bytes of the record after this field
//	attributes     int8     unused, zero
//	timestampDelta varlong  timestamp - baseTimestamp
//	offsetDelta    varint   offset - baseOffset; 0, 1, 2, ... from a producer
//	keyLength      varint   -1 for a null key
//	key            bytes
//	valueLength    varint   -1 for a null value (a tombstone)
//	value          bytes
//	headerCount    varint   0 or more
//	headers        headerCount times:
//	  keyLength    varint   0 or more (header keys are never null)
//	  key          bytes    UTF-8
//	  valueLength  varint   -1 for a null value
//	  value        bytes
//
// # What Validate guarantees
//
// A nil error from Validate means, for the batch it was given:
//   - it is exactly one batch: magic 2, batchLength = len(batch)-12, and
//     no more than MaxBatchBytes bytes;
//   - the CRC32C matches, and the codec is one Kafka defines;
//   - from a client (not Internal): baseOffset is 0, numRecords >= 1 and
//     lastOffsetDelta = numRecords-1, it is not a control batch, and a
//     batch with a producer ID has a base sequence;
//   - the records decompress within DecompressLimit bytes, and exactly
//     numRecords well-framed records fill them with no bytes left over;
//     each record's length covers exactly its fields, every varint fits
//     its type, no length is below -1, header keys are not null;
//   - offset deltas are 0, 1, 2, ... (Internal: strictly increasing and
//     at most lastOffsetDelta, as compaction leaves them);
//   - with RequireKeys, no key is null; with the timestamp options, every
//     record timestamp is in the allowed window.
//
// Validate does not check maxTimestamp against the records (Kafka
// rewrites it rather than refusing the batch), producer epochs or
// sequences against producer state, nor record attributes. It never
// modifies the batch. Its errors are *Error values carrying the Kafka
// error code a broker answers with; errors.Is(err, ErrCorrupt) tells
// corrupt bytes from rule violations.
package record
