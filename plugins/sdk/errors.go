package sdk

import "errors"

// Errors shared by every contract in this package. Implementations return
// them (possibly wrapped with more detail) and callers test them with
// errors.Is. A transport (such as the gRPC shim in plugins/sdk/serve) must
// carry them across the process boundary so errors.Is still matches on the
// far side.
var (
	// ErrNotFound: the key does not exist (Get, or a Delete with
	// ExpectVersion AnyVersion).
	ErrNotFound = errors.New("sdk: key not found")

	// ErrVersionMismatch: a compare-and-set condition was false. The write
	// (or the whole Txn) was not applied; the store is unchanged. A missing
	// key counts as version 0 when conditions are compared.
	ErrVersionMismatch = errors.New("sdk: version mismatch")

	// ErrSessionExpired: the session named in the request has expired, was
	// revoked, or never existed. Its ephemeral keys are gone or going.
	ErrSessionExpired = errors.New("sdk: session expired")

	// ErrCompacted: a watch asked to start before the oldest revision the
	// store still retains. The caller must List again (which reports the
	// revision it reflects) and watch from there.
	ErrCompacted = errors.New("sdk: revision compacted")

	// ErrWatchOverflow: the watcher fell too far behind the writers and the
	// store ended its stream rather than block writers or buffer without
	// bound. Events received before this error are valid; the caller
	// re-watches from the last revision it processed (and may then get
	// ErrCompacted).
	ErrWatchOverflow = errors.New("sdk: watcher fell behind")

	// ErrUnavailable: the store or the plugin serving it is down or
	// unreachable. The request may or may not have been applied; the broker
	// maps this to a retriable Kafka error code.
	ErrUnavailable = errors.New("sdk: unavailable")

	// ErrClosed: the store, watch or other handle was closed by its owner.
	ErrClosed = errors.New("sdk: closed")

	// ErrInvalidArgument: the request is malformed (empty key, key or value
	// too large, ExpectVersion below -1, a Txn naming a key twice, a
	// non-positive TTL, ...). Retrying the same request cannot succeed.
	ErrInvalidArgument = errors.New("sdk: invalid argument")

	// ErrAuthenticationFailed: the client's credentials were rejected. Use
	// *AuthenticationError to carry a message safe to show the client.
	ErrAuthenticationFailed = errors.New("sdk: authentication failed")
)
