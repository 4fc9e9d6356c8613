package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vltava/vltava/plugins/host"
)

// Server is the HTTP endpoint. Create it with New before the plugin host
// (so the host can report calls to ObservePluginCall), hand it the host
// and the broker as they come up, then Serve. Close stops it and waits
// for its goroutine.
type Server struct {
	log   *slog.Logger
	reg   *prometheus.Registry
	calls *prometheus.HistogramVec

	plugins atomic.Pointer[host.Host]
	ready   atomic.Pointer[func() bool]

	mux  *http.ServeMux
	srv  *http.Server
	ln   net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

// New returns a server with the process and plugin collectors registered.
func New(logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{log: logger, reg: prometheus.NewRegistry()}
	s.calls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vltava_plugin_call_duration_seconds",
		Help:    "Latency of sdk calls to plugin processes, by plugin and gRPC method.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50µs .. 1.6s
	}, []string{"kind", "name", "method"})
	s.reg.MustRegister(s.calls, &processCollector{s: s}, &pluginCollector{s: s})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{logger}}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", s.readyz)
	s.mux = mux
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s
}

// Mux is the server's request router, for more pages (the console).
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Listening reports whether the server has a listener.
func (s *Server) Listening() bool { return s.ln != nil }

// Register adds collectors (the broker's, say) to the registry.
func (s *Server) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.reg.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}

// SetPlugins hands the server the plugin host whose processes it reports.
func (s *Server) SetPlugins(h *host.Host) { s.plugins.Store(h) }

// SetReady sets the readiness check /readyz answers from.
func (s *Server) SetReady(ready func() bool) { s.ready.Store(&ready) }

// ObservePluginCall is a host.Options.ObserveCall.
func (s *Server) ObservePluginCall(p *host.Plugin, method string, took time.Duration, _ error) {
	s.calls.WithLabelValues(p.Spec().Kind, pluginName(p), method).Observe(took.Seconds())
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if f := s.ready.Load(); f != nil && (*f)() {
		fmt.Fprintln(w, "ready")
		return
	}
	http.Error(w, "not ready", http.StatusServiceUnavailable)
}

// Listen binds addr and starts serving on it.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics: serving stopped", "err", err)
		}
	}()
	return nil
}

// Addr is the bound address, nil before Listen.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops serving (in-flight scrapes get a second to finish) and
// waits for the serving goroutine.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if s.ln != nil {
			err = s.srv.Shutdown(ctx)
		}
		s.wg.Wait()
	})
	return err
}

// slogPrinter adapts promhttp's error log to slog.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.l.Warn("metrics: " + fmt.Sprint(v...)) }
