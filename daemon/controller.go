package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/builtin"
	"github.com/vltava/vltava/plugins/metastore/raft"
)

// serveController runs process.roles=controller, Kafka's controller-only
// node: a voter of the raft metadata quorum in this process, with no
// Kafka listener, no partition logs and no plugins. It serves until a
// signal, then leaves the quorum cleanly (a second signal exits at once).
func serveController(cfg config.Broker, sigCh <-chan os.Signal, stdout io.Writer, logger *slog.Logger) int {
	if name := strings.TrimSpace(cfg.MetadataStore); name != "local" && name != "raft" {
		logger.Error("process.roles controller runs the built-in raft store", "metadata.store", name)
		return 1
	}
	conf, err := raftStoreConfig(cfg, maps.Clone(cfg.MetadataStoreConfig))
	if err != nil {
		logger.Error("invalid configuration", "err", err)
		return 1
	}
	voters, err := raft.ParseVoters(fmt.Sprint(conf["voters"]))
	if err != nil {
		logger.Error("invalid configuration", "err", err)
		return 1
	}
	quorum := cfg.ControllerQuorumListen
	if quorum == "" {
		quorum = voters[cfg.NodeID]
	}
	slog.SetDefault(logger) // the raft store logs through the default logger
	var st builtin.RaftStore
	if err := st.Configure(context.Background(), conf); err != nil {
		logger.Error("metadata quorum voter failed to start", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "vltavad controller ready: quorum voter on %s, data in %s, node %d\n", quorum, conf["data.dir"], cfg.NodeID)
	logger.Info("controller ready", "node", cfg.NodeID, "quorum", quorum, "voters", raft.FormatVoters(voters))
	sig := <-sigCh
	logger.Info("shutting down", "signal", sig.String())
	done := make(chan error, 1)
	go func() { done <- st.Close() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
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
