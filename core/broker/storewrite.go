package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/vltava/vltava/plugins/sdk"
)

// Request handlers that write the metadata store themselves (CreateAcls,
// DeleteAcls, AlterClientQuotas, AlterUserScramCredentials, the
// producer-ID blocks behind InitProducerId) go through beginStoreWrite:
// while this broker's lease on the store has lapsed (a whole-store
// outage it leads through, or fenced: core/cluster, "When the whole store
// is down") the change is refused at once, before any part of it is
// written; otherwise the store calls of the request are bounded by
// storeWriteTimeout, so a store that stops answering before the lease
// lapses still gets the client a retriable answer well inside its request
// timeout (franz-go's is 10 s for requests that carry none, Kafka's Java
// client's 30 s), never a hang.

// storeWriteTimeout bounds the metadata-store calls of one request.
const storeWriteTimeout = 5 * time.Second

// errStoreRefused is a metadata change refused while the store is
// unreachable; it wraps sdk.ErrUnavailable, so storeErrorCode answers it
// with the retriable REQUEST_TIMED_OUT.
type errStoreRefused struct{ msg string }

func (e *errStoreRefused) Error() string { return "broker: " + e.msg }
func (e *errStoreRefused) Unwrap() error { return sdk.ErrUnavailable }

// beginStoreWrite refuses a metadata change while the store is
// unreachable (see above), else returns ctx bounded by storeWriteTimeout
// and its cancel.
func (b *Broker) beginStoreWrite(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if _, msg, ok := b.storeUnreachable(); ok {
		return ctx, func() {}, &errStoreRefused{msg: msg}
	}
	wctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
	return wctx, cancel, nil
}

// allocateProducerID hands out a producer ID (producerIDs): from this
// broker's block without the store, else by reserving a new block, which
// is refused while the store is unreachable; the call, waiting for
// another request's reservation included, is bounded by
// storeWriteTimeout.
func (b *Broker) allocateProducerID(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
	defer cancel()
	return b.pids.allocate(ctx, b.store, func() error {
		if _, msg, ok := b.storeUnreachable(); ok {
			return &errStoreRefused{msg: msg}
		}
		return nil
	})
}

// producerIDErrorCode is the code InitProducerId (and an EndTxn that
// needs a new producer ID) answers when no producer ID could be had:
// COORDINATOR_LOAD_IN_PROGRESS while the store does not answer, which is
// what Kafka's brokers answer while their controller has not granted a
// new block (a retriable error every client retries, where some older
// clients treat REQUEST_TIMED_OUT as fatal for this request).
func producerIDErrorCode(err error) errorCode {
	if errors.Is(err, errProducerIDsCorrupt) {
		return kerr.UnknownServerError.Code
	}
	return kerr.CoordinatorLoadInProgress.Code
}
