package sdk

import (
	"context"
	"time"
)

// MetadataStore is the cluster's source of truth: broker registrations,
// topics, partition state, ACLs. It is the contract ZooKeeper, etcd and a
// Raft key-value store all offer: get, list by prefix, compare-and-set
// writes, small atomic transactions, watches from a revision, and sessions
// whose keys vanish when the session ends.
//
// # Keys and values
//
// Keys are non-empty strings compared byte-wise; by convention they are
// slash-separated paths ("brokers/1", "topics/orders/partitions/0").
// Values are opaque bytes. A store may cap key and value sizes and rejects
// larger ones with ErrInvalidArgument.
//
// # Revisions and versions
//
// The store has one revision counter. Every write (Put, Delete, a Txn with
// at least one op, the end of a session that owned keys) increments it by
// exactly one and all its changes carry that revision. A key's Version is
// the revision of its last write (etcd's ModRevision), so versions are
// unique across keys and increase with every write to a key; 0 means "does
// not exist". Requests that fail change nothing and do not consume a
// revision.
//
// # Compare-and-set
//
// Writes carry ExpectVersion: AnyVersion (-1) writes unconditionally,
// MustNotExist (0) requires the key to be absent, n > 0 requires the key's
// current Version to be n. A false condition fails with ErrVersionMismatch
// and changes nothing.
//
// # Consistency and ordering
//
// Operations are linearizable: once a write returns, every later Get, List
// or Watch (from any caller of this store) observes it. Watch delivers
// every change to its prefix exactly once, in revision order, with no gaps.
// Changes that share a revision come from one atomic write; their order
// among themselves is unspecified.
//
// # Sessions
//
// A session is a liveness lease: GrantSession returns an ID that stays
// alive while KeepAlive is called within its TTL. Keys put with a Session
// are ephemeral: when the session expires or is revoked they are deleted
// in one write, and watchers see delete events. A later Put of the key
// decides its fate: with another session (or none) the key moves to that
// session (or becomes persistent). Expiry is judged by the store's clock;
// a client should keep alive at a fraction of the TTL (a third is usual).
//
// # Threading
//
// All methods are safe for concurrent use. A method may block on I/O;
// ctx bounds the wait, but a write whose ctx ends mid-flight may still be
// applied (as with any remote store). After Close every method returns
// ErrClosed.
//
// # Errors
//
// Errors match the sentinels of this package with errors.Is:
// ErrNotFound, ErrVersionMismatch, ErrSessionExpired, ErrCompacted,
// ErrWatchOverflow, ErrInvalidArgument, ErrClosed, and ErrUnavailable
// when the store or its plugin process is unreachable (the outcome of the
// request is then unknown). ctx errors are returned as they are.
type MetadataStore interface {
	// Get returns the key's value and version, or ErrNotFound.
	Get(ctx context.Context, req *GetRequest) (*GetResponse, error)

	// List returns every key with the prefix ("" is every key), sorted
	// byte-wise, and the store revision the listing reflects: a watch
	// started from that revision misses nothing that happened after it.
	List(ctx context.Context, req *ListRequest) (*ListResponse, error)

	// Put writes the key if ExpectVersion holds and returns its new
	// version. A Session other than NoSession makes the key ephemeral; an
	// ended session fails with ErrSessionExpired.
	Put(ctx context.Context, req *PutRequest) (*PutResponse, error)

	// Delete removes the key if ExpectVersion holds. ExpectVersion
	// MustNotExist is meaningless here and fails with ErrInvalidArgument.
	// Deleting a missing key fails with ErrNotFound under AnyVersion and
	// with ErrVersionMismatch under n > 0.
	Delete(ctx context.Context, req *DeleteRequest) (*DeleteResponse, error)

	// Txn applies all of its ops at one revision if every condition
	// holds, or nothing (ErrVersionMismatch) if any fails. A Txn may not
	// name a key in two ops.
	Txn(ctx context.Context, req *TxnRequest) (*TxnResponse, error)

	// Watch streams the changes to keys with the prefix whose revision is
	// greater than FromRevision; FromRevision 0 means "from now" (changes
	// after the revision current when Watch returns). Starting before the
	// oldest revision the store retains fails with ErrCompacted, either
	// from Watch or from the first Recv. The stream lives until Close,
	// until ctx ends, or until the store ends it (ErrWatchOverflow,
	// ErrClosed, ErrUnavailable).
	Watch(ctx context.Context, req *WatchRequest) (WatchStream, error)

	// GrantSession creates a session that lives for TTL unless kept
	// alive. The store may round the TTL up to a minimum it supports and
	// reports the TTL granted.
	GrantSession(ctx context.Context, req *GrantSessionRequest) (*GrantSessionResponse, error)

	// KeepAlive restarts the session's TTL, or fails with
	// ErrSessionExpired if it has already ended.
	KeepAlive(ctx context.Context, req *KeepAliveRequest) (*KeepAliveResponse, error)

	// RevokeSession ends the session now. When it returns, the session's
	// ephemeral keys are deleted. Revoking an ended session fails with
	// ErrSessionExpired.
	RevokeSession(ctx context.Context, req *RevokeSessionRequest) (*RevokeSessionResponse, error)

	// Close releases the store. Open watches end with ErrClosed; sessions
	// of a local store end with the process. Close may be called more
	// than once; later calls return nil.
	Close() error
}

// WatchStream is a stream of changes, shaped to map onto a gRPC server stream.
//
// Recv and Close may be called from different goroutines, but Recv must
// not be called concurrently with itself.
type WatchStream interface {
	// Recv blocks until the next change and returns it. Events come in
	// revision order, each exactly once. Once Recv returns an error, the
	// stream is over and every later call returns an error: ErrClosed after
	// Close, ctx.Err() after the Watch ctx ended, ErrCompacted,
	// ErrWatchOverflow, ErrUnavailable. The caller owns the returned event.
	Recv() (*WatchEvent, error)

	// Close ends the stream and releases its resources. A blocked Recv
	// returns ErrClosed. Close is idempotent and returns nil.
	Close() error
}

// Compactor is an optional capability of a MetadataStore whose watch
// history can be discarded on request. Stores without it still may
// discard history on their own and report ErrCompacted.
type Compactor interface {
	// Compact discards the change history at and below Revision: a later
	// Watch with 0 < FromRevision < Revision fails with ErrCompacted.
	// Current keys and values are not affected.
	Compact(ctx context.Context, req *CompactRequest) (*CompactResponse, error)
}

// ExpectVersion values with a special meaning.
const (
	AnyVersion   int64 = -1 // write unconditionally
	MustNotExist int64 = 0  // create only: the key must be absent
)

// SessionID names a session. NoSession (0) means a persistent key.
type SessionID int64

// NoSession is the Session of a persistent key.
const NoSession SessionID = 0

// KeyValue is one key as stored.
type KeyValue struct {
	Key     string
	Value   []byte
	Version int64     // revision of the key's last write
	Session SessionID // owning session of an ephemeral key, else NoSession
}

// GetRequest asks for one key.
type GetRequest struct {
	Key string
}

// GetResponse is the key as of Revision.
type GetResponse struct {
	KeyValue
	Revision int64 // store revision the read reflects
}

// ListRequest asks for every key starting with Prefix.
type ListRequest struct {
	Prefix string
}

// ListResponse holds the keys sorted byte-wise.
type ListResponse struct {
	KVs      []KeyValue
	Revision int64 // store revision the listing reflects
}

// PutRequest writes Key = Value.
type PutRequest struct {
	Key           string
	Value         []byte
	ExpectVersion int64     // AnyVersion, MustNotExist, or the current version
	Session       SessionID // NoSession for a persistent key
}

// PutResponse reports the written key's new version, which is also the
// store revision of the write.
type PutResponse struct {
	Version int64
}

// DeleteRequest removes Key.
type DeleteRequest struct {
	Key           string
	ExpectVersion int64 // AnyVersion or the current version
}

// DeleteResponse reports the revision of the delete.
type DeleteResponse struct {
	Revision int64
}

// Condition compares a key's current version (0 if absent) with Version.
// Version MustNotExist requires absence; n > 0 requires that version.
type Condition struct {
	Key     string
	Version int64
}

// OpType says what an Op does.
type OpType int8

// Op types.
const (
	OpPut    OpType = 1
	OpDelete OpType = 2
)

// Op is one write in a Txn. Deleting an absent key is a no-op; use a
// Condition to require that it exists.
type Op struct {
	Type    OpType
	Key     string
	Value   []byte    // OpPut only
	Session SessionID // OpPut only
}

// TxnRequest is an atomic multi-key write: if every condition holds, all
// ops are applied at one revision, else none.
type TxnRequest struct {
	Conditions []Condition
	Ops        []Op
}

// TxnResponse reports the revision of the write, which is every put key's
// new version. A Txn without ops reports the current revision.
type TxnResponse struct {
	Revision int64
}

// WatchRequest starts a watch.
type WatchRequest struct {
	Prefix       string
	FromRevision int64 // deliver changes with a greater revision; 0 = from now
}

// EventType says what a WatchEvent records.
type EventType int8

// Event types.
const (
	EventPut    EventType = 1
	EventDelete EventType = 2
)

// String returns "put" or "delete".
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// WatchEvent is one change to one key.
type WatchEvent struct {
	Type     EventType
	Key      string
	Value    []byte    // new value of a put; nil for a delete
	Version  int64     // new version of a put; 0 for a delete
	Session  SessionID // session of a put key
	Revision int64     // store revision of the write
}

// GrantSessionRequest asks for a session.
type GrantSessionRequest struct {
	TTL time.Duration // must be positive
}

// GrantSessionResponse names the new session.
type GrantSessionResponse struct {
	ID  SessionID
	TTL time.Duration // as granted; may exceed the request
}

// KeepAliveRequest renews a session.
type KeepAliveRequest struct {
	ID SessionID
}

// KeepAliveResponse reports the TTL restarted.
type KeepAliveResponse struct {
	TTL time.Duration
}

// RevokeSessionRequest ends a session.
type RevokeSessionRequest struct {
	ID SessionID
}

// RevokeSessionResponse is empty for now.
type RevokeSessionResponse struct{}

// CompactRequest discards history up to Revision.
type CompactRequest struct {
	Revision int64
}

// CompactResponse is empty for now.
type CompactResponse struct{}
