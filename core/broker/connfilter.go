package broker

// Connection filtering on accept: authenticators that implement
// sdk.ConnFilter (the ip authenticator) decide on each connection by its
// address before the broker reads a byte of it. Every filter must admit
// the connection; the first principal a filter names becomes the
// connection's (a SASL login later replaces it). A filter that cannot be
// asked (plugin down, timeout) refuses: an address is never admitted
// because its filter was unavailable.

import (
	"context"
	"net"
	"time"

	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

// admitTimeout bounds one filter's answer.
const admitTimeout = 5 * time.Second

// connFilter returns the wire hook (told each connection's listener), or
// nil when no authenticator filters connections.
func (b *Broker) connFilter() wire.ConnFilterFunc {
	var filters []sdk.ConnFilter
	for _, a := range b.authenticators {
		if f, ok := a.(sdk.ConnFilter); ok {
			filters = append(filters, f)
		}
	}
	if len(filters) == 0 {
		return nil
	}
	return func(ctx context.Context, remote net.Addr, listener string) (sdk.Principal, bool, string) {
		ctx, cancel := context.WithTimeout(ctx, admitTimeout)
		defer cancel()
		var p sdk.Principal
		for _, f := range filters {
			resp, err := f.Admit(ctx, &sdk.AdmitRequest{ClientAddr: remote.String(), ListenerName: listener})
			if err != nil {
				return sdk.Principal{}, false, "connection filter unavailable: " + err.Error()
			}
			if !resp.Allowed {
				return sdk.Principal{}, false, resp.Reason
			}
			if p.Name == "" && resp.Principal.Name != "" {
				p = resp.Principal
				if p.Type == "" {
					p.Type = sdk.PrincipalTypeUser
				}
			}
		}
		return p, true, ""
	}
}
