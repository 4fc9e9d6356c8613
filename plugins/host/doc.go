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
// failed health checks (an Info call every HealthInterval), and restarts
// it with exponential backoff between MinBackoff and MaxBackoff (reset
// once a process has stayed up for ResetAfter). While a plugin is down,
// calls fail at once with an error wrapping sdk.ErrUnavailable; the
// broker maps that to a retriable Kafka error code and serves everything
// else. A restarted process is configured again before calls resume.
// State a plugin kept in memory (a local store's sessions) is gone after a
// restart, as the sdk contracts allow.
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
