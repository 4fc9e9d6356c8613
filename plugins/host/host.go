package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Spec says how to run one plugin.
type Spec struct {
	// Kind is serve.KindAssignor, serve.KindAuthenticator or
	// serve.KindMetadataStore; the plugin must report the same kind.
	Kind string
	// Name names the plugin in logs and errors: the built-in name or the
	// executable's path as the config gave it. Empty means Path's base.
	Name string
	// Path is the executable; Args its arguments.
	Path string
	Args []string
	// Config is the plugin's free-form config map, sent in Configure.
	Config map[string]any
	// Store is the broker's metadata store, lent to an authenticator
	// that implements sdk.StoreReader as a read-only view of
	// sdk.SecurityPrefix (see plugins/sdk/serve). Nil lends a view whose
	// calls fail with sdk.ErrUnavailable. Ignored for other kinds.
	Store sdk.MetadataStore
}

func (s Spec) name() string {
	if s.Name != "" {
		return s.Name
	}
	return filepath.Base(s.Path)
}

// Options tune a Host. Zero values take the defaults shown.
type Options struct {
	// Logger receives the host's log and the plugins' stderr; nil means
	// slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds a process's start and handshake (10s).
	StartTimeout time.Duration
	// CallTimeout bounds Info, Configure and health checks (10s).
	CallTimeout time.Duration
	// ExitPoll is how often the supervisor checks for an exited process
	// (50ms; the check costs a mutex, no system call).
	ExitPoll time.Duration
	// HealthInterval is how often a live process is health-checked (2s).
	HealthInterval time.Duration
	// HealthTimeout bounds one health check (1s). Three failed checks in
	// a row mark the process hung: it is killed (SIGKILL, no graceful
	// shutdown: it would not answer) and restarted.
	HealthTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart
	// (100ms, 10s); it doubles after each failed or short-lived run.
	MinBackoff, MaxBackoff time.Duration
	// ResetAfter is how long a process must stay up for the backoff to
	// return to MinBackoff (30s).
	ResetAfter time.Duration
	// ObserveCall, when set, is told of every completed sdk call a plugin
	// served (not go-plugin's own or health checks): the plugin, the gRPC
	// method, how long it took and its error. It runs on the caller's
	// goroutine and must not block (a metrics histogram, say).
	ObserveCall func(p *Plugin, method string, took time.Duration, err error)
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.StartTimeout, 10*time.Second)
	def(&o.CallTimeout, 10*time.Second)
	def(&o.ExitPoll, 50*time.Millisecond)
	def(&o.HealthInterval, 2*time.Second)
	def(&o.HealthTimeout, time.Second)
	def(&o.MinBackoff, 100*time.Millisecond)
	def(&o.MaxBackoff, 10*time.Second)
	def(&o.ResetAfter, 30*time.Second)
}

// Host runs plugin processes. Create it with New, Load plugins, and Close
// it to stop them all.
type Host struct {
	opts Options

	mu      sync.Mutex
	plugins []*Plugin
	closed  bool
}

// New returns a host with no plugins.
func New(opts Options) *Host {
	opts.setDefaults()
	return &Host{opts: opts}
}

// Load starts a plugin, checks its kind, configures it and starts its
// supervisor. The error names the plugin; a bad config key wraps
// sdk.ErrInvalidArgument, and a plugin built for another SDK protocol
// version wraps ErrIncompatible.
func (h *Host) Load(ctx context.Context, spec Spec) (*Plugin, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, errors.New("host: closed")
	}
	p := newPlugin(h, spec)
	if err := p.firstStart(ctx); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		p.stop()
		return nil, errors.New("host: closed")
	}
	h.plugins = append(h.plugins, p)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.supervise()
	}()
	return p, nil
}

// Probe starts a plugin, reads its Info (checking its kind), and stops
// it without configuring it: what `vltavad plugins` shows.
func (h *Host) Probe(ctx context.Context, spec Spec) (serve.Info, error) {
	p := newPlugin(h, spec)
	p.probe = true
	return p.start(ctx)
}

// Plugins lists the loaded plugins in load order.
func (h *Host) Plugins() []*Plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Plugin(nil), h.plugins...)
}

// Close stops every plugin's supervisor and process, in parallel, and
// waits for them. Calls made afterwards fail with sdk.ErrUnavailable.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps := h.plugins
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop()
		}()
	}
	wg.Wait()
	return nil
}

// ErrIncompatible marks a plugin refused at the handshake because it
// speaks another SDK protocol version.
var ErrIncompatible = errors.New("host: incompatible plugin protocol version")

func (p *Plugin) errorf(format string, args ...any) error {
	return fmt.Errorf("host: plugin %q (%s): %w", p.spec.name(), p.spec.Kind, fmt.Errorf(format, args...))
}
