// Package host runs plugin processes for the broker and hands out the
// plugins/sdk interfaces that talk to them.
//
//	h := host.New(host.Options{Logger: logger})
//	defer h.Close()
//	p, err := h.Load(ctx, host.Spec{Kind: serve.KindMetadataStore, Name: "local",
//		Path: exe, Args: []string{"plugin", "metastore", "local"},
//		Config: map[string]any{"path": dir}})
//	store := p.MetadataStore() // an sdk.MetadataStore over gRPC
//
// # Lifecycle
//
// Load starts the process (go-plugin handshake: magic cookie and
// protocol version), asks it to describe itself (Info), checks its kind,
// and sends it its config (Configure). Any failure there is an error that
// names the plugin, and for a bad config the key.
//
// Each loaded plugin has a supervisor goroutine, owned by the Host: it
// notices an exited process within ExitPoll and a hung one after three
// failed health checks in a row (an Info call every HealthInterval, each
// bounded by HealthTimeout). A hung process is SIGKILLed at once (it
// would not answer go-plugin's graceful shutdown call, which has no
// deadline); any other stop gets the graceful call and is SIGKILLed if
// the process is still there after a few seconds. The supervisor then
// restarts the plugin with exponential backoff between MinBackoff and
// MaxBackoff (reset once a process has stayed up for ResetAfter). While a plugin is down,
// calls fail at once with an error wrapping sdk.ErrUnavailable; the
// broker maps that to a retriable Kafka error code and serves everything
// else. A restarted process is configured again before calls resume.
// State a plugin kept in memory (a local store's sessions) is gone after a
// restart, as the sdk contracts allow. While a process hangs (before it is
// detected), calls to it wait for their ctx.
//
// # Watches across a metadata store restart
//
// A watch lives in the store's process, so it dies with it: a
// WatchStream open through the host returns an error wrapping
// sdk.ErrUnavailable from Recv as soon as the process exits or is killed
// (the stream's connection closes), and keeps returning it. It never
// resumes on the restarted process. A watcher must then re-list and
// re-watch: wait until calls succeed again (retry with backoff while they
// fail with sdk.ErrUnavailable), List the prefix to rebuild its view, and
// Watch from the List's revision (FromRevision = ListResponse.Revision),
// so no change between the two is missed. Sessions granted by the old
// process may be gone too (a local store keeps them in memory):
// KeepAlive then fails with sdk.ErrSessionExpired and the owner must
// grant a new session and re-create its ephemeral keys.
//
// The process's stderr is forwarded into the host's slog logger with the
// attributes plugin=<name> and kind=<kind>: JSON lines written by the
// plugin's slog (see plugins/sdk/serve) keep their level and attributes,
// other lines are logged at Info.
//
// Close stops the supervisors, then every process (a graceful shutdown
// call, SIGKILL after two seconds). If the broker dies without Close, the
// plugins notice their parent is gone and exit (see plugins/sdk/serve).
//
// # Goroutines
//
// Per plugin: the supervisor (stopped and awaited by Close), and
// go-plugin's own readers of the process's output (ended with the
// process).
package host
