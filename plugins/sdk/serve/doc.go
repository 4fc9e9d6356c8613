// Package serve carries the plugins/sdk contracts across a process
// boundary: a plugin's main calls Assignor, Authenticator or MetadataStore
// and the broker's plugin host talks to it through the client adapters
// (NewAssignorClient, ...), which implement the same sdk interfaces. Plugin
// authors see only plugins/sdk types; the protobuf messages live in the
// internal package pluginpb.
//
//	func main() { serve.Assignor(modAssignor{}) }
//
// # Writing an authenticator
//
// Mechanisms builds an sdk.Authenticator from SASL mechanisms and does
// the session bookkeeping (handles, End, bounding conversations that never
// finish); Plain turns a PasswordFunc — func(ctx, user, password)
// (sdk.Principal, error) — into SASL PLAIN, and a multi-step mechanism is
// a Mechanism whose Start returns a Conversation:
//
//	func main() {
//		serve.Authenticator(serve.Mechanisms(serve.Plain(check)))
//	}
//
// Lock order in Sessions: a session's mutex (held for its Step) before
// the session table's; the table's is never held while waiting for a
// session.
//
// An authenticator that implements sdk.StoreReader is lent a read-only
// view of the broker's metadata store under sdk.SecurityPrefix (see
// hoststore.go): the host serves it on a go-plugin broker stream, and the
// plugin side dials it when Configure arrives and hands it to UseStore
// before the plugin's own Configure runs.
//
// # Transport
//
// hashicorp/go-plugin starts the process and performs the handshake; the
// calls are gRPC over a Unix socket. The messages are defined in
// internal/pluginpb/plugin.proto and the generated code is committed
// (regenerate with `go generate ./plugins/sdk/serve/...`; building needs
// no protoc).
//
// # Handshake
//
// The host sets an environment variable (the magic cookie) that the
// plugin checks before serving. The cookie is a UX feature, not a security
// feature: it stops a user who runs a plugin binary by hand from getting a
// confusing hang, nothing more. The protocol version is negotiated with
// go-plugin's VersionedPlugins: a plugin built against an SDK that speaks
// another ProtocolVersion is refused at startup with an error naming both
// versions.
//
// # Configuration
//
// The broker config gives each plugin a free-form map. Right after the
// handshake the host sends it in a Configure call; an implementation that
// wants it implements Configurer and decodes it with DecodeConfig into
// its own struct. Unknown keys and bad types fail the broker's startup
// with the plugin's name and the key. A plugin that does not implement
// Configurer accepts only an empty map.
//
// # Errors
//
// Errors cross the boundary with their identity: the sdk sentinels
// (errors.Is(err, sdk.ErrNotFound) holds on the host when the plugin
// returned a wrapped sdk.ErrNotFound), *sdk.AuthenticationError with its
// Message, and ctx cancellation and deadlines. Any other plugin error
// keeps its text. A call to a plugin process that is down or unreachable
// fails with an error wrapping sdk.ErrUnavailable.
//
// # Logging and lifetime
//
// The serve functions make slog's default logger write JSON lines to the
// process's stderr, which the host forwards into the broker log tagged
// with the plugin's name (plain stderr lines are forwarded too). A plugin
// process exits when its parent dies (a watchdog polls the parent pid),
// so a crashed broker leaves no orphans; when the host stops it cleanly,
// a MetadataStore's Close is called before the process exits.
package serve
