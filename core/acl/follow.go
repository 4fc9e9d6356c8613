package acl

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
)

// Follow keeps the authorizer's bindings equal to the store's until ctx
// ends: it lists the prefix, then applies the watch's changes, listing
// again after any watch error. A stored value that does not decode is
// logged and skipped. The caller owns the goroutine that runs it.
func (a *Authorizer) Follow(ctx context.Context, store sdk.MetadataStore, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := a.followOnce(ctx, store, log)
		if ctx.Err() != nil {
			return
		}
		log.Warn("acl: following the metadata store failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (a *Authorizer) followOnce(ctx context.Context, store sdk.MetadataStore, log *slog.Logger) error {
	lr, err := store.List(ctx, &sdk.ListRequest{Prefix: Prefix})
	if err != nil {
		return err
	}
	cur := map[string]Binding{}
	for _, kv := range lr.KVs {
		if b, err := Decode(kv.Value); err == nil {
			cur[kv.Key] = b
		} else {
			log.Warn("acl: skipping a stored binding", "key", kv.Key, "err", err)
		}
	}
	a.setMap(cur)
	w, err := store.Watch(ctx, &sdk.WatchRequest{Prefix: Prefix, FromRevision: lr.Revision})
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
		} else if b, err := Decode(ev.Value); err == nil {
			cur[ev.Key] = b
		} else {
			log.Warn("acl: skipping a stored binding", "key", ev.Key, "err", err)
		}
		a.setMap(cur)
	}
}

func (a *Authorizer) setMap(m map[string]Binding) {
	bs := make([]Binding, 0, len(m))
	for _, b := range m {
		bs = append(bs, b)
	}
	a.Set(bs)
}
