package main

import (
	"errors"
	"log/slog"
	"syscall"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/daemon/metrics"
)

// startMetrics starts the metrics.listen HTTP listener. With the default
// address already taken (a second broker on the same host) it logs that
// and carries on without the listener; an address the operator chose must
// bind. The server it returns is usable (and closable) either way.
func startMetrics(cfg config.Broker, logger *slog.Logger) (*metrics.Server, error) {
	m := metrics.New(logger)
	if cfg.MetricsListen == "" {
		return m, nil
	}
	err := m.Listen(cfg.MetricsListen)
	switch {
	case err == nil:
		logger.Info("metrics: serving /metrics, /healthz and /readyz", "addr", m.Addr().String())
	case cfg.MetricsListen == config.DefaultMetricsListen && errors.Is(err, syscall.EADDRINUSE):
		logger.Warn("metrics: default address in use (another broker on this host?); running without the metrics listener: set metrics.listen", "addr", cfg.MetricsListen)
		err = nil
	}
	return m, err
}

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
