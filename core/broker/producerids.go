package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/vltava/vltava/plugins/sdk"
)

// producerIDsKey is the metadata key holding the next unreserved producer
// ID, as decimal ASCII ("1000"). An absent key means 0.
const producerIDsKey = "/producer-ids/next"

// errProducerIDsCorrupt: producerIDsKey holds something else than a
// producer ID.
var errProducerIDsCorrupt = errors.New("broker: not a producer ID")

// producerIDBlock is how many producer IDs one store write reserves.
const producerIDBlock = 1000

// producerIDReserveAttempts bounds the compare-and-set retries when other
// writers (other brokers sharing the store) reserve blocks concurrently.
const producerIDReserveAttempts = 8

// producerIDs hands out producer IDs from blocks reserved in the metadata
// store, so an ID is never handed out twice, across restarts and across
// brokers sharing the store. IDs of a block not used before a restart are
// skipped, never reused. The zero value is ready to use.
//
// One caller at a time reserves a block, without holding mu during the
// store write; the others wait for it, each only as long as its ctx
// allows, so a store that stops answering holds no caller past its own
// deadline (callers queued behind a mutex would each add a whole store
// timeout to the wait of the next).
//
// INVARIANT: next <= end, and every ID in [next, end) is reserved in the
// store for this broker and not yet handed out.
type producerIDs struct {
	mu        sync.Mutex
	next, end int64         // guarded by mu
	reserving chan struct{} // guarded by mu; non-nil while a caller reserves, closed when it is done
}

// allocate returns a producer ID never returned before by any broker using
// store. It writes to the store once per producerIDBlock IDs; refuse is
// asked first and may refuse that write (the store is unreachable). An
// ID of the current block is handed out whatever refuse says. ctx bounds
// the whole call, waiting for another caller's reservation included.
func (p *producerIDs) allocate(ctx context.Context, store sdk.MetadataStore, refuse func() error) (int64, error) {
	for {
		p.mu.Lock()
		if p.next < p.end {
			id := p.next
			p.next++
			p.mu.Unlock()
			return id, nil
		}
		if wait := p.reserving; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue // its block, or its failure: look again
			case <-ctx.Done():
				return -1, fmt.Errorf("broker: wait for a producer ID block: %w", ctx.Err())
			}
		}
		if err := refuse(); err != nil {
			p.mu.Unlock()
			return -1, err
		}
		done := make(chan struct{})
		p.reserving = done
		p.mu.Unlock()
		start, end, err := reserveProducerIDs(ctx, store)
		p.mu.Lock()
		if err == nil {
			p.next, p.end = start, end
		}
		p.reserving = nil
		close(done)
		p.mu.Unlock()
		if err != nil {
			return -1, err
		}
	}
}

// reserveProducerIDs reserves the next block, [start, end), with
// compare-and-set on producerIDsKey.
func reserveProducerIDs(ctx context.Context, store sdk.MetadataStore) (int64, int64, error) {
	for range producerIDReserveAttempts {
		start, version, err := readNextProducerID(ctx, store)
		if err != nil {
			return 0, 0, err
		}
		end := start + producerIDBlock
		_, err = store.Put(ctx, &sdk.PutRequest{
			Key:           producerIDsKey,
			Value:         strconv.AppendInt(nil, end, 10),
			ExpectVersion: version,
		})
		if errors.Is(err, sdk.ErrVersionMismatch) {
			continue // another writer reserved a block first; read again
		}
		if err != nil {
			return 0, 0, fmt.Errorf("broker: reserve producer IDs: %w", err)
		}
		return start, end, nil
	}
	return 0, 0, fmt.Errorf("broker: reserve producer IDs: %w after %d attempts", sdk.ErrVersionMismatch, producerIDReserveAttempts)
}

// readNextProducerID returns the stored next producer ID and the key's
// version (0 when absent, so the Put that follows creates it).
func readNextProducerID(ctx context.Context, store sdk.MetadataStore) (next, version int64, err error) {
	got, err := store.Get(ctx, &sdk.GetRequest{Key: producerIDsKey})
	if errors.Is(err, sdk.ErrNotFound) {
		return 0, sdk.MustNotExist, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("broker: read producer IDs: %w", err)
	}
	next, err = strconv.ParseInt(string(got.Value), 10, 64)
	if err != nil || next < 0 || next > 1<<62 {
		return 0, 0, fmt.Errorf("%w: %s holds %q", errProducerIDsCorrupt, producerIDsKey, got.Value)
	}
	return next, got.Version, nil
}
