package wire

import (
	"context"
	"net"

	"github.com/vltava/vltava/plugins/sdk"
)

// ConnFilterFunc decides on a connection when it is accepted, before any
// byte is read from it (Config.ConnFilter). ok false refuses it; reason
// is logged. A non-zero principal becomes the connection's principal.
// ctx ends when the server closes; the func bounds its own wait.
type ConnFilterFunc func(ctx context.Context, remote net.Addr, listener string) (principal sdk.Principal, ok bool, reason string)

// admit runs Config.ConnFilter on a new connection, on the connection's
// own goroutine so a slow filter holds up no other accept. A refused
// connection is closed at once and logged with the filter's reason.
func (c *conn) admit() bool {
	f := c.s.cfg.ConnFilter
	if f == nil {
		return true
	}
	p, ok, reason := f(c.ctx, c.info.Remote, c.info.Listener)
	if !ok {
		c.log.Warn("wire: connection refused on accept", "reason", reason)
		c.cancel()
		c.nc.Close()
		return false
	}
	if p.Name != "" {
		c.info.Principal = p
	}
	return true
}
