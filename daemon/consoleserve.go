package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/daemon/console"
	"github.com/vltava/vltava/daemon/inspect"
	"github.com/vltava/vltava/daemon/metrics"
	"github.com/vltava/vltava/plugins/host"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// startConsole mounts the web console on the metrics listener when
// console.enable allows it: always on a loopback listener, elsewhere only
// with SASL configured. The returned console (nil when off) must be
// closed.
func startConsole(cfg config.Broker, m *metrics.Server, b *broker.Broker, in *inspect.Inspector, plugins *host.Host, logger *slog.Logger) (*console.Console, error) {
	if !cfg.ConsoleEnable || !m.Listening() {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(m.Addr().String())
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && cfg.SaslAuthenticators == "" {
		logger.Warn("console: off: the metrics listener is not on a loopback address and no SASL authentication is configured", "addr", m.Addr().String())
		return nil, nil
	}
	store := cfg.MetadataStore
	if cfg.ControllerQuorumVoters != "" {
		store = "raft"
	}
	var login func(ctx context.Context, user, password string) (*inspect.Inspector, error)
	if cfg.HasSASLListener() {
		login = saslLogin(b, cfg.NodeID)
	}
	c, err := console.New(console.Options{
		Broker:    b,
		Inspector: in,
		Login:     login,
		Store:     store,
		StoreUp: func() bool {
			for _, p := range plugins.Plugins() {
				if p.Spec().Kind == serve.KindMetadataStore {
					return p.Pid() > 0
				}
			}
			return true // in process
		},
		Plugins: func() []console.Plugin {
			var out []console.Plugin
			for _, p := range plugins.Plugins() {
				n, p50, p99 := m.PluginLatency(p.Spec().Kind, p.Name())
				cp := console.Plugin{Kind: p.Spec().Kind, Name: p.Name(), Version: p.Info().Version, PID: p.Pid(),
					Up: p.Pid() > 0, Restarts: p.Restarts(), Calls: p.Calls(), P50: "-", P99: "-"}
				if n > 0 {
					cp.P50, cp.P99 = p50.Round(time.Microsecond).String(), p99.Round(time.Microsecond).String()
				}
				out = append(out, cp)
			}
			return out
		},
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	c.Register(m.Mux())
	c.Start()
	logger.Info("console: serving", "url", "http://"+m.Addr().String()+"/ui/")
	return c, nil
}

// saslLogin logs a console user in to the broker's SASL listener: PLAIN,
// else SCRAM-SHA-512, whichever the broker's authenticators accept.
func saslLogin(b *broker.Broker, nodeID int32) func(ctx context.Context, user, password string) (*inspect.Inspector, error) {
	return func(ctx context.Context, user, password string) (*inspect.Inspector, error) {
		mechs := []sasl.Mechanism{
			plain.Auth{User: user, Pass: password}.AsMechanism(),
			scram.Auth{User: user, Pass: password}.AsSha512Mechanism(),
		}
		var errs []error
		for _, m := range mechs {
			in := inspect.New(b.Addr, nodeID, kgo.SASL(m), kgo.RequestRetries(0))
			adm, err := in.Admin()
			if err == nil {
				_, err = adm.ListBrokers(ctx)
			}
			if err == nil {
				return in, nil
			}
			in.Close()
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), err))
		}
		return nil, fmt.Errorf("console: login as %q: %v", user, errs)
	}
}
