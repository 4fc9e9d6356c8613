package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/clients"
	"github.com/vltava/vltava/core/wire"
)

// recordUsage notes the request's API and version under the software its
// connection named (core/clients), for the compatibility report.
func (b *Broker) recordUsage(req *wire.Request) {
	if req.Conn == nil {
		return
	}
	v, ok := b.clientConns.Load(req.Conn.ID)
	if !ok {
		v, _ = b.clientConns.LoadOrStore(req.Conn.ID, b.clients.Open())
	}
	cc := v.(*clients.Conn)
	if r, ok := req.Body.(*kmsg.ApiVersionsRequest); ok && r.Version >= 3 {
		cc.Named(r.ClientSoftwareName, r.ClientSoftwareVersion)
	}
	cc.Used(req.Key, req.Version, req.ClientID)
}

// clientClosed ends a closed connection's usage tracking.
func (b *Broker) clientClosed(conn *wire.ConnInfo) {
	if v, ok := b.clientConns.LoadAndDelete(conn.ID); ok {
		v.(*clients.Conn).Closed()
	}
}

// Clients returns the client software that has connected and the API
// versions each used.
func (b *Broker) Clients() []clients.Usage { return b.clients.Snapshot() }
