package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/vltava/vltava/core/broker"
	vlog "github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/daemon/fdlimit"
	"github.com/vltava/vltava/daemon/inspect"
	"github.com/vltava/vltava/daemon/metrics"
	"github.com/vltava/vltava/plugins/host"
)

// serveMain runs a broker until a signal and returns the exit code.
func serveMain(args []string, stdout, stderr io.Writer) int {
	f, code, ok := loadFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	level, err := f.level()
	if err != nil {
		fmt.Fprintln(stderr, "vltavad:", err)
		return 2
	}
	cfg, err := f.load()
	if err != nil {
		fmt.Fprintln(stderr, "vltavad:", err)
		return 1
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "vltavad:", err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				logger.Error("writing CPU profile", "err", err)
			}
		}()
	}

	// Subscribe before starting so a signal during startup is not lost.
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigCh)

	limit, err := fdlimit.Check(cfg)
	if err != nil {
		logger.Error("vltavad cannot start", "err", err)
		return 1
	}
	if limit > 0 {
		// Half the descriptors for segment files (fdlimit's plan).
		vlog.SetMaxOpenFiles(int(min(limit/2, 1<<30)))
	}
	m, err := startMetrics(cfg, logger)
	if err != nil {
		logger.Error("metrics listener failed", "err", err)
		return 1
	}
	defer m.Close()

	if roles, _ := cfg.Roles(); !roles.Broker { // Validate checked it
		return serveController(cfg, sigCh, stdout, logger)
	}

	// Plugins first: the broker needs the metadata store to start. The
	// host stops every plugin process when serveMain returns, however it
	// returns.
	plugins := host.New(host.Options{Logger: logger, ObserveCall: m.ObservePluginCall})
	defer plugins.Close()
	m.SetPlugins(plugins)
	var loaded loadedPlugins
	if f.inProcessPlugins {
		if err := checkInProcess(cfg); err != nil {
			logger.Error("--in-process-plugins", "err", err)
			return 1
		}
		loaded.assignors = nil // the broker's own built-ins, in process
	} else if loaded, err = loadPlugins(context.Background(), plugins, cfg); err != nil {
		logger.Error("plugins failed to start", "err", err)
		return 1
	}

	bc := metrics.NewBrokerCollector(nil)
	b, err := broker.New(cfg, broker.Options{
		Logger:         logger,
		ObserveRequest: bc.ObserveRequest,
		Store:          loaded.store,
		Assignors:      loaded.assignors,
		Authenticators: loaded.authenticators,
	})
	if err != nil {
		logger.Error("invalid configuration", "err", err)
		return 1
	}
	in := inspect.New(b.Addr, cfg.NodeID)
	defer in.Close()
	bc.SetBroker(b, in)
	if err := m.Register(bc); err != nil {
		logger.Error("metrics", "err", err)
		return 1
	}
	m.SetReady(func() bool { return isClosed(b.Ready()) })
	con, err := startConsole(cfg, m, b, in, plugins, logger)
	if err != nil {
		logger.Error("console", "err", err)
		return 1
	}
	if con != nil {
		defer con.Close()
	}
	if err := b.Start(); err != nil {
		logger.Error("broker failed to start", "err", err)
		return 1
	}
	select {
	case <-b.Ready():
		fmt.Fprintf(stdout, "vltavad ready: listening on %s, data in %s, node %d\n", b.Addr(), cfg.LogDirs, cfg.NodeID)
	case sig := <-sigCh:
		logger.Info("signal during startup, shutting down", "signal", sig.String())
		return closeBroker(b, sigCh, logger)
	}
	select {
	case sig := <-sigCh:
		logger.Info("shutting down", "signal", sig.String())
		return closeBroker(b, sigCh, logger)
	case <-b.Failed():
		// As Kafka halts a broker whose log directories are all offline:
		// closing ends the cluster session, so leadership moves at once.
		logger.Error("log directory offline, stopping the broker; repair or replace the disk, then restart", "err", b.Err())
		closeBroker(b, sigCh, logger)
		fmt.Fprintln(stderr, "vltavad: stopped:", b.Err())
		return 1
	}
}

// closeBroker shuts the broker down cleanly; another signal meanwhile exits
// at once.
func closeBroker(b *broker.Broker, sigCh <-chan os.Signal, logger *slog.Logger) int {
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err != nil {
			logger.Error("shutdown failed", "err", err)
			return 1
		}
		logger.Info("shut down cleanly")
		return 0
	case sig := <-sigCh:
		logger.Warn("second signal, exiting without a clean shutdown", "signal", sig.String())
		return 1
	}
}

// startCPUProfile starts a pprof CPU profile written to path; the returned
// function stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	fh, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(fh); err != nil {
		fh.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return fh.Close()
	}, nil
}
