// Package local is the embedded, single-node sdk.MetadataStore: one bbolt
// file, every write fsync'ed before it returns. It is the default store of
// a one-broker Vltava and the reference implementation the contract tests
// in plugins/sdk/plugintest run against.
//
// # On-disk layout
//
// The bbolt file has two top-level buckets. These names and byte layouts
// are part of the on-disk format and must not change without bumping
// formatVersion.
//
//	bucket "meta"
//	  "format"   → 1 byte:  formatVersion (1)
//	  "revision" → 8 bytes: store revision, uint64 big-endian
//	bucket "kv"
//	  <key bytes, as given (UTF-8 by convention), 1..4096 bytes>
//	             → record
//
// bbolt keeps keys sorted byte-wise, which is the order List returns.
//
// A record (the value stored under a key in "kv"):
//
//	offset  size  field
//	0       1     format   formatVersion (1)
//	1       8     version  revision of the key's last write, uint64 big-endian, > 0
//	9       8     session  owning session ID, uint64 big-endian; 0 = persistent
//	17      n     value    the user's value bytes (n may be 0)
//
// A record shorter than 17 bytes or with another format byte is corrupt
// (ErrCorrupt).
//
// # What is not on disk
//
// Sessions live in memory only: a single-node store cannot outlive its own
// process, so every session of a previous process is dead. Open deletes the
// ephemeral keys it finds (records with session ≠ 0) in one write that
// consumes one revision. Watch history also lives in memory (a bounded
// ring of recent events); after Open, watches can start from the current
// revision or later, and earlier ones fail with sdk.ErrCompacted.
//
// # Invariants
//
// INVARIANT: the "revision" value is ≥ every record's version, and every
// write transaction that changes "kv" also sets "revision" to the write's
// revision, in the same bbolt transaction.
//
// # Goroutines
//
// Open starts one goroutine, the session reaper (Store.reap), which ends
// expired sessions. Close stops it and waits for it. A Watch whose context
// can end registers a context.AfterFunc that the watch's Close
// deregisters. Nothing else runs in the background.
package local
