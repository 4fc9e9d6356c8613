package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Plugin is one loaded plugin: its process (restarted as needed) and the
// sdk adapters that call it.
type Plugin struct {
	host  *Host
	spec  Spec
	lw    *lineWriter
	info  serve.Info // from the first start; fixed for the plugin's life
	probe bool       // start only to read Info, then stop (Host.Probe)

	calls    atomic.Int64
	restarts atomic.Int64

	mu     sync.Mutex
	client *plugin.Client   // current process; nil while down
	conn   *grpc.ClientConn // its connection
	unlend func()           // stops lending the store to it (authenticators)
	upAt   time.Time        // when the current process came up

	stopCh chan struct{}
	wg     sync.WaitGroup

	assignor      sdk.Assignor
	authenticator sdk.Authenticator
	store         sdk.MetadataStore
}

func newPlugin(h *Host, spec Spec) *Plugin {
	return &Plugin{
		host:   h,
		spec:   spec,
		lw:     &lineWriter{logger: h.opts.Logger.With("plugin", spec.name(), "kind", spec.Kind)},
		stopCh: make(chan struct{}),
	}
}

// String names the plugin for logs and errors.
func (p *Plugin) String() string { return fmt.Sprintf("plugin %q (%s)", p.spec.name(), p.spec.Kind) }

// Name is the plugin's name as logs give it: the built-in name or the
// executable's path as configured.
func (p *Plugin) Name() string { return p.spec.name() }

// Spec is how the plugin was loaded.
func (p *Plugin) Spec() Spec { return p.spec }

// Info is what the plugin reported when it first started.
func (p *Plugin) Info() serve.Info { return p.info }

// Calls counts the sdk calls (not health checks or Configure) made to
// the plugin: the way to show that a code path makes no plugin calls.
func (p *Plugin) Calls() int64 { return p.calls.Load() }

// Restarts counts the times the process was restarted.
func (p *Plugin) Restarts() int64 { return p.restarts.Load() }

// Pid is the process ID of the current process, 0 while down.
func (p *Plugin) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil {
		return 0
	}
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Conn returns the live connection, or an error wrapping
// sdk.ErrUnavailable while the process is down (serve.Conn).
func (p *Plugin) Conn() (grpc.ClientConnInterface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return nil, fmt.Errorf("host: %s is down (restarting): %w", p, sdk.ErrUnavailable)
	}
	return p.conn, nil
}

// Assignor is the plugin as an sdk.Assignor; nil for another kind.
func (p *Plugin) Assignor() sdk.Assignor { return p.assignor }

// Authenticator is the plugin as an sdk.Authenticator; nil for another
// kind.
func (p *Plugin) Authenticator() sdk.Authenticator { return p.authenticator }

// MetadataStore is the plugin as an sdk.MetadataStore (also an
// sdk.Compactor if the plugin's store is one); nil for another kind.
// Its Close does not stop the process; Host.Close does.
func (p *Plugin) MetadataStore() sdk.MetadataStore { return p.store }

// firstStart starts the process for Load and builds the adapters.
func (p *Plugin) firstStart(ctx context.Context) error {
	info, err := p.start(ctx)
	if err != nil {
		return err
	}
	p.info = info
	switch p.spec.Kind {
	case serve.KindAssignor:
		p.assignor = serve.NewAssignorClient(info.Name, p)
	case serve.KindAuthenticator:
		p.authenticator = serve.NewAuthenticatorClient(p, info.ConnFilter)
	case serve.KindMetadataStore:
		p.store = serve.NewMetadataStoreClient(p, info.Compactor)
	}
	return nil
}

var versionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// start launches a process, checks it and configures it; on success it
// becomes the current one.
func (p *Plugin) start(ctx context.Context) (serve.Info, error) {
	opts := p.host.opts
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  serve.Handshake(serve.ProtocolVersion),
		VersionedPlugins: serve.ClientPlugins(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     opts.StartTimeout,
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard}),
		Stderr:           p.lw,
		SyncStdout:       p.lw,
		SyncStderr:       p.lw,
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(p.countUnary),
			grpc.WithChainStreamInterceptor(p.countStream),
		},
	})
	fail := func(err error) (serve.Info, error) {
		client.Kill()
		return serve.Info{}, err
	}
	rpc, err := client.Client()
	if err != nil {
		if m := versionRE.FindStringSubmatch(err.Error()); m != nil {
			return fail(p.errorf("built for SDK protocol version %s, but this broker speaks version %d; rebuild the plugin against a matching plugins/sdk: %w",
				m[1], serve.ProtocolVersion, ErrIncompatible))
		}
		return fail(p.errorf("start %s: %w", p.spec.Path, err))
	}
	raw, err := rpc.Dispense(p.spec.Kind)
	if err != nil {
		return fail(p.errorf("%w", err))
	}
	d := raw.(*serve.Dispensed)
	conn := d.Conn
	var unlend func()
	if p.spec.Kind == serve.KindAuthenticator && !p.probe {
		if unlend, err = serve.ServeStore(d, p.spec.Store); err != nil {
			return fail(p.errorf("%w", err))
		}
	}
	fail = func(err error) (serve.Info, error) {
		client.Kill()
		if unlend != nil {
			unlend()
		}
		return serve.Info{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()
	info, err := serve.ReadInfo(cctx, conn)
	if err != nil {
		return fail(p.errorf("info: %w", err))
	}
	if info.Kind != p.spec.Kind {
		return fail(p.errorf("the executable serves a %s plugin, not a %s", info.Kind, p.spec.Kind))
	}
	if p.probe {
		client.Kill()
		return info, nil
	}
	if err := serve.Configure(cctx, conn, p.spec.Config); err != nil {
		return fail(p.errorf("%w", err))
	}
	p.mu.Lock()
	p.client, p.conn, p.upAt, p.unlend = client, conn, time.Now(), unlend
	p.mu.Unlock()
	p.host.opts.Logger.Debug("host: plugin started", "plugin", p.spec.name(), "kind", p.spec.Kind,
		"path", p.spec.Path, "version", info.Version, "pid", p.Pid())
	return info, nil
}

// countUnary and countStream count the sdk calls (the services other
// than Control, go-plugin's own and health).
// A stream's latency is that of opening it.
func (p *Plugin) countUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !p.count(method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	p.observe(method, start, err)
	return err
}

func (p *Plugin) countStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !p.count(method) {
		return streamer(ctx, desc, cc, method, opts...)
	}
	start := time.Now()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	p.observe(method, start, err)
	return cs, err
}

// count counts an sdk call and reports whether method is one.
func (p *Plugin) count(method string) bool {
	if strings.HasPrefix(method, "/vltava.plugin.v1.") && !strings.HasPrefix(method, "/vltava.plugin.v1.Control/") {
		p.calls.Add(1)
		return true
	}
	return false
}

func (p *Plugin) observe(method string, start time.Time, err error) {
	if obs := p.host.opts.ObserveCall; obs != nil {
		obs(p, method, time.Since(start), err)
	}
}

// killGrace bounds a graceful stop: go-plugin's Kill first asks the
// process to shut down over gRPC, with no deadline, and waits 2s for it to
// exit; a process that does not answer (hung, SIGSTOPped) would block it
// for ever, so it is SIGKILLed after killGrace.
const killGrace = 5 * time.Second

// takeDown detaches the current process (if any) and kills it. hung skips
// the graceful shutdown: the process is SIGKILLed first.
func (p *Plugin) takeDown(hung bool) {
	p.mu.Lock()
	client, unlend := p.client, p.unlend
	p.client, p.conn, p.unlend = nil, nil, nil
	p.mu.Unlock()
	if client == nil {
		return
	}
	if unlend != nil {
		defer unlend()
	}
	var proc *os.Process
	if rc := client.ReattachConfig(); rc != nil && rc.Pid > 0 {
		proc, _ = os.FindProcess(rc.Pid)
	}
	if proc != nil {
		if hung {
			proc.Kill()
		} else {
			force := time.AfterFunc(killGrace, func() { proc.Kill() })
			defer force.Stop()
		}
	}
	client.Kill()
}

// stop ends the supervisor and the process (Host.Close).
func (p *Plugin) stop() {
	close(p.stopCh)
	p.wg.Wait()
	p.takeDown(false)
	if p.store != nil {
		p.store.Close()
	}
}

// supervise watches the process and restarts it when it dies or stops
// answering. It returns when stopCh closes.
func (p *Plugin) supervise() {
	opts := p.host.opts
	log := p.host.opts.Logger.With("plugin", p.spec.name(), "kind", p.spec.Kind)
	backoff := opts.MinBackoff
	exitTick := time.NewTicker(opts.ExitPoll)
	defer exitTick.Stop()
	healthTick := time.NewTicker(opts.HealthInterval)
	defer healthTick.Stop()
	failedChecks := 0
	for {
		down, hung := false, false
		select {
		case <-p.stopCh:
			return
		case <-exitTick.C:
			p.mu.Lock()
			down = p.client == nil || p.client.Exited()
			p.mu.Unlock()
			if down {
				log.Warn("host: plugin process exited; restarting", "backoff", backoff)
			}
		case <-healthTick.C:
			if err := p.healthCheck(); err != nil {
				failedChecks++
				log.Warn("host: plugin health check failed", "err", err, "failures", failedChecks)
				if failedChecks >= 3 {
					log.Warn("host: plugin not answering; killing and restarting it", "pid", p.Pid(), "backoff", backoff)
					down, hung = true, true
				}
			} else {
				failedChecks = 0
			}
		}
		if !down {
			continue
		}
		failedChecks = 0
		p.mu.Lock()
		if !p.upAt.IsZero() && time.Since(p.upAt) >= opts.ResetAfter {
			backoff = opts.MinBackoff
		}
		p.mu.Unlock()
		p.takeDown(hung)
		backoff = p.restart(log, backoff)
		if backoff < 0 {
			return
		}
	}
}

// restart retries starting the process, sleeping backoff (doubled after
// each failure, capped) before each try. It returns the backoff for the
// next outage, or -1 if stopCh closed.
func (p *Plugin) restart(log interface {
	Info(string, ...any)
	Warn(string, ...any)
}, backoff time.Duration) time.Duration {
	opts := p.host.opts
	for {
		select {
		case <-p.stopCh:
			return -1
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, opts.MaxBackoff)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-p.stopCh:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, err := p.start(ctx)
		cancel()
		if err == nil {
			p.restarts.Add(1)
			log.Info("host: plugin restarted", "pid", p.Pid(), "restarts", p.restarts.Load())
			return backoff
		}
		if errors.Is(err, ErrIncompatible) {
			log.Warn("host: restarted plugin refused", "err", err)
		} else {
			log.Warn("host: plugin restart failed", "err", err, "next_backoff", backoff)
		}
	}
}

// healthCheck asks the current process to describe itself.
func (p *Plugin) healthCheck() error {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	if conn == nil {
		return nil // the exit check handles a missing process
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.host.opts.HealthTimeout)
	defer cancel()
	_, err := serve.ReadInfo(ctx, conn)
	return err
}
