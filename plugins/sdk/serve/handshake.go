package serve

import (
	"context"
	"strconv"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the version of the broker–plugin protocol this SDK
// speaks. It changes only when a change to the messages breaks old peers;
// the host refuses a plugin that speaks another version.
const ProtocolVersion = 2

// servedVersion is the protocol version a plugin announces. It equals
// ProtocolVersion; tests build plugins with
// -ldflags "-X github.com/vltava/vltava/plugins/sdk/serve.servedVersion=N"
// to impersonate an incompatible SDK. (-X needs a constant string
// initializer; TestServedVersion keeps it equal to ProtocolVersion.)
var servedVersion = "2"

func servedProtocol() int {
	if v, err := strconv.Atoi(servedVersion); err == nil {
		return v
	}
	return ProtocolVersion
}

// Plugin kinds, as named in `vltavad plugin <kind> <name>` and in Info.
const (
	KindAssignor      = "assignor"
	KindAuthenticator = "authenticator"
	KindMetadataStore = "metastore"
)

// Kinds lists the plugin kinds.
var Kinds = []string{KindAssignor, KindAuthenticator, KindMetadataStore}

// Handshake returns the go-plugin handshake for a protocol version. The
// magic cookie is a UX feature, not a security feature (see the package
// doc).
func Handshake(version int) plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  uint(version),
		MagicCookieKey:   "VLTAVA_PLUGIN_MAGIC_COOKIE",
		MagicCookieValue: "d1b3f0a4-vltava-plugin-7c55",
	}
}

// grpcPlugin is the go-plugin face of every kind: the server side registers
// the kind's services, the client side hands back the raw connection.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	register func(*grpc.Server)
	// broker is the plugin side's go-plugin broker, set by GRPCServer
	// before any call is served.
	broker *plugin.GRPCBroker
}

func (p *grpcPlugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	p.broker = b
	if p.register != nil {
		p.register(s)
	}
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Dispensed{Conn: c, broker: b}, nil
}

// ClientPlugins is the plugin set a host passes to go-plugin as
// VersionedPlugins: every kind at ProtocolVersion. Dispensing a kind
// yields a *Dispensed.
func ClientPlugins() map[int]plugin.PluginSet {
	set := plugin.PluginSet{}
	for _, k := range Kinds {
		set[k] = &grpcPlugin{}
	}
	return map[int]plugin.PluginSet{ProtocolVersion: set}
}
