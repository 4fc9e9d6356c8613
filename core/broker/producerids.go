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
// INVARIANT: next <= end, and every ID in [next, end) is reserved in the
// store for this broker and not yet handed out.
type producerIDs struct {
	mu        sync.Mutex
	next, end int64 // guarded by mu
}

// allocate returns a producer ID never returned before by any broker using
// store. It writes to the store once per producerIDBlock IDs, and only
// then calls begin, which may refuse the write (the store is unreachable)
// and bounds it; the lock is held during that write so concurrent callers
// wait for the new block instead of reserving several.
func (p *producerIDs) allocate(ctx context.Context, store sdk.MetadataStore, begin func(context.Context) (context.Context, context.CancelFunc, error)) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		wctx, cancel, err := begin(ctx)
		if err == nil {
			err = p.reserveLocked(wctx, store)
		}
		cancel()
		if err != nil {
			return -1, err
		}
	}
	id := p.next
	p.next++
	return id, nil
}

// reserveLocked reserves the next block with compare-and-set on
// producerIDsKey. p.mu must be held.
func (p *producerIDs) reserveLocked(ctx context.Context, store sdk.MetadataStore) error {
	for range producerIDReserveAttempts {
		start, version, err := readNextProducerID(ctx, store)
		if err != nil {
			return err
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
			return fmt.Errorf("broker: reserve producer IDs: %w", err)
		}
		p.next, p.end = start, end
		return nil
	}
	return fmt.Errorf("broker: reserve producer IDs: %w after %d attempts", sdk.ErrVersionMismatch, producerIDReserveAttempts)
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
