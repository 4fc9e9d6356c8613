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

	if roles, _ := cfg.Roles(); !roles.Broker { // Validate checked it
		return serveController(cfg, sigCh, stdout, logger)
	}

	// Plugins first: the broker needs the metadata store to start. The
	// host stops every plugin process when serveMain returns, however it
	// returns.
	plugins := host.New(host.Options{Logger: logger})
	defer plugins.Close()
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

	b, err := broker.New(cfg, broker.Options{
		Logger:         logger,
		Store:          loaded.store,
		Assignors:      loaded.assignors,
		Authenticators: loaded.authenticators,
		// A store outside the brokers (ZooKeeper, etcd) is shared: the
		// brokers form a cluster through it without a raft quorum.
		Cluster: sharedStore(cfg),
	})
	if err != nil {
		logger.Error("invalid configuration", "err", err)
		return 1
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
	sig := <-sigCh
	logger.Info("shutting down", "signal", sig.String())
	return closeBroker(b, sigCh, logger)
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
