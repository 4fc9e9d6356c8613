// Package follow keeps a process's copy of a metadata store prefix
// current: it lists the prefix, then applies the watch's changes from the
// listing's revision, listing again (with backoff) after any watch error.
// Client quotas (core/quota) and ACLs (core/acl) each follow their prefix
// with it.
package follow

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// Prefix keeps a map of the keys under prefix to their decoded values
// until ctx ends, calling apply with the whole map after the listing and
// after every change (apply must not keep the map: it is changed in
// place). A value decode refuses is logged and left out. name prefixes the
// log lines ("quota", "acl"). The caller owns the goroutine that runs it.
func Prefix[V any](ctx context.Context, store sdk.MetadataStore, prefix, name string, log *slog.Logger,
	decode func(key string, value []byte) (V, error), apply func(map[string]V)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := once(ctx, store, prefix, name, log, decode, apply)
		if ctx.Err() != nil {
			return
		}
		log.Warn(name+": following the metadata store failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func once[V any](ctx context.Context, store sdk.MetadataStore, prefix, name string, log *slog.Logger,
	decode func(key string, value []byte) (V, error), apply func(map[string]V)) error {
	lr, err := store.List(ctx, &sdk.ListRequest{Prefix: prefix})
	if err != nil {
		return err
	}
	cur := map[string]V{}
	put := func(key string, value []byte) {
		if v, err := decode(key, value); err == nil {
			cur[key] = v
		} else {
			log.Warn(name+": skipping a stored value", "key", key, "err", err)
		}
	}
	for _, kv := range lr.KVs {
		put(kv.Key, kv.Value)
	}
	apply(cur)
	w, err := store.Watch(ctx, &sdk.WatchRequest{Prefix: prefix, FromRevision: lr.Revision})
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		ev, err := w.Recv()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if ev.Type == sdk.EventDelete {
			delete(cur, ev.Key)
		} else {
			put(ev.Key, ev.Value)
		}
		apply(cur)
	}
}
