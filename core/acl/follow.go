package acl

import (
	"context"
	"log/slog"

	"github.com/vltava/vltava/core/follow"
	"github.com/vltava/vltava/plugins/sdk"
)

// Follow keeps the authorizer's bindings equal to the store's until ctx
// ends: it lists the prefix, then applies the watch's changes, listing
// again after any watch error. A stored value that does not decode is
// logged and skipped. The caller owns the goroutine that runs it.
func (a *Authorizer) Follow(ctx context.Context, store sdk.MetadataStore, log *slog.Logger) {
	follow.Prefix(ctx, store, Prefix, "acl", log,
		func(_ string, value []byte) (Binding, error) { return Decode(value) }, a.setMap)
}

func (a *Authorizer) setMap(m map[string]Binding) {
	bs := make([]Binding, 0, len(m))
	for _, b := range m {
		bs = append(bs, b)
	}
	a.Set(bs)
}
