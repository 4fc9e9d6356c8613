package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/config"
	vlog "github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/daemon/fdlimit"
	"github.com/vltava/vltava/daemon/inspect"
	"github.com/vltava/vltava/daemon/metrics"
	"github.com/vltava/vltava/plugins/host"
)

// serveMain runs a broker until a signal and returns the exit code.
func serveMain(args []string, stdout, stderr io.Writer) int {
	// Subscribe first, so a signal during startup is not lost: checkListen
	// binds the Kafka port for a moment, and a SIGTERM sent once that port
	// answered must stop the broker cleanly, not kill it.
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigCh)
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
	summary := newSummaryHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	logger := slog.New(summary)
	if len(f.ignored) > 0 {
		logger.Warn("config keys of Kafka's that have no effect in Vltava are ignored", "keys", strings.Join(f.ignored, ","))
	}
	for _, n := range f.notes {
		logger.Info(n)
	}
	roles, _ := cfg.Roles() // Validate checked it
	if roles.Broker {
		// Before anything is written: a port in use must not leave a new
		// data directory behind.
		if err := checkListen(cfg); err != nil {
			logger.Error("cannot listen", "err", err)
			return 1
		}
	}
	fresh := isFresh(cfg.LogDirs)
	locks, err := lockDirs(cfg.LogDirs)
	if err != nil {
		logger.Error("cannot use the data directory", "err", err)
		return 1
	}
	started := false
	defer func() {
		for _, l := range locks {
			l.release(fresh && !started)
		}
	}()
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

	if !roles.Broker {
		started = true
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
		ObserveQueue:   bc.ObserveQueue,
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
	// The inspector (console, metrics) reaches the broker like another
	// broker would: on the inter-broker listener, with its credentials.
	// Without credentials (a single broker on a SASL listener) the
	// console shows no broker data.
	selfOpts, err := b.InterBrokerClientOpts()
	if err != nil {
		logger.Warn("console and metrics cannot query the broker", "err", err)
	}
	in := inspect.New(b.InterBrokerAddr, cfg.NodeID, selfOpts...)
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
	started = true // from here on the data directory holds the broker's files
	if err := b.Start(); err != nil {
		logger.Error("broker failed to start", "err", err)
		return 1
	}
	// Start opened (and after kill -9 recovered) every log it holds.
	summary.summary(logger)
	select {
	case <-b.Ready():
		summary.summary(logger)
		adv := cfg.AdvertisedListeners
		if adv == "" {
			adv = b.Addr() // port 0: what was bound
		}
		fmt.Fprintf(stdout, "vltavad ready: listening on %s, advertised as %s, data in %s, node %d\n",
			b.Addr(), adv, cfg.LogDirs, cfg.NodeID)
	case sig := <-sigCh:
		logger.Info("signal during startup, shutting down", "signal", sig.String())
		return closeBroker(b, sigCh, logger)
	}
	// Partitions a cluster hands this broker later are recovered later:
	// their summary comes within a minute.
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			summary.summary(logger)
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
}

// checkListen binds every Kafka listener's address for a moment, so that
// a port in use is reported before the data directory is touched.
func checkListen(cfg config.Broker) error {
	ls, err := cfg.ParseListeners()
	if err != nil {
		return err
	}
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("listeners %s://%s: %w", l.Name, l.Addr, err)
		}
		ln.Close()
	}
	return nil
}

// isFresh reports whether no data directory holds a broker's files yet
// (none exists, or none has meta.properties or meta/).
func isFresh(dirs string) bool {
	for _, d := range strings.Split(dirs, ",") {
		d = strings.TrimSpace(d)
		for _, name := range []string{"meta.properties", "meta"} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				return false
			}
		}
	}
	return true
}

// lockDirs locks each of the comma-separated data directories.
func lockDirs(dirs string) ([]*dirLock, error) {
	var locks []*dirLock
	for _, d := range strings.Split(dirs, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		l, err := lockDir(d)
		if err != nil {
			for _, held := range locks {
				held.release(false)
			}
			return nil, err
		}
		locks = append(locks, l)
	}
	return locks, nil
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
