package cluster

import (
	"context"
	"errors"

	"github.com/vltava/vltava/plugins/sdk"
)

// Registered reports whether the store holds this Node's registration
// now (read from the store, not the view): false while its session is
// lost (a store restart, a long pause) until it has registered again.
// A broker answers requests that place replicas with a retriable error
// meanwhile, since the store counts it as absent.
func (n *Node) Registered(ctx context.Context) (bool, error) {
	resp, err := n.store.Get(ctx, &sdk.GetRequest{Key: brokerKey(n.cfg.NodeID)})
	if errors.Is(err, sdk.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	info, err := decodeBroker(resp.Value)
	if err != nil {
		return false, err
	}
	return info.Incarnation == n.incarnation, nil
}

// CheckSession makes the session keeper renew the session now rather
// than at its next interval: a broker that sees its own registration
// gone from the store (the store restarted and lost its sessions) learns
// at once that it must register again. It does not block.
func (n *Node) CheckSession() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}
