package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/builtin"
	"github.com/vltava/vltava/plugins/host"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

func init() {
	subcommands["plugin"] = subcommand{
		summary: "serve a built-in plugin: plugin <kind> <name> (run by the broker, not by hand)",
		run:     servePlugin,
	}
	subcommands["plugins"] = subcommand{
		summary: "start the plugins a config would load and list their kind, name, version and path",
		run:     listPlugins,
	}
}

// servePlugin is `vltavad plugin <kind> <name>`: the broker re-executes
// its own binary this way to run a built-in out of process.
func servePlugin(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: vltavad plugin <kind> <name>\n\nbuilt-in plugins:")
		for _, p := range builtin.All() {
			fmt.Fprintf(stderr, "  %-10s %-11s %s\n", p.Kind, p.Name, p.Summary)
		}
		return 2
	}
	p, err := builtin.Lookup(args[0], args[1])
	if err != nil {
		fmt.Fprintln(stderr, "vltavad:", err)
		return 2
	}
	p.Serve() // exits the process
	return 0
}

// listPlugins is `vltavad plugins [serve flags]`.
func listPlugins(args []string, stdout, stderr io.Writer) int {
	f, code, ok := loadFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	cfg, err := f.load()
	if err != nil {
		fmt.Fprintln(stderr, "vltavad:", err)
		return 1
	}
	specs, err := pluginSpecs(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "vltavad:", err)
		return 1
	}
	h := host.New(host.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	defer h.Close()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tVERSION\tPATH")
	failed := false
	for _, s := range specs {
		info, err := h.Probe(context.Background(), s)
		version := info.Version
		if err != nil {
			version = "-"
			fmt.Fprintln(stderr, "vltavad:", err)
			failed = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Kind, s.Name, version, pathOf(s))
	}
	tw.Flush()
	if failed {
		return 1
	}
	return 0
}

func pathOf(s host.Spec) string {
	if len(s.Args) > 0 {
		return s.Path + " " + strings.Join(s.Args, " ")
	}
	return s.Path
}

// pluginSpecs turns the broker config into the plugins to load: the
// metadata store, then the assignors, then the authenticators. An entry
// is a built-in name or an executable path (anything with a slash).
func pluginSpecs(cfg config.Broker) ([]host.Spec, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("plugins: own executable: %w", err)
	}
	var specs []host.Spec
	add := func(key, kind, entry string, conf map[string]any) error {
		s := host.Spec{Kind: kind, Name: entry, Config: maps.Clone(conf)}
		if strings.ContainsRune(entry, '/') {
			s.Path = entry
		} else if _, err := builtin.Lookup(kind, entry); err == nil {
			s.Path, s.Args = exe, []string{"plugin", kind, entry}
		} else {
			return fmt.Errorf("%s: %q is neither a built-in %s nor an executable path (use ./name for a file here)", key, entry, kind)
		}
		specs = append(specs, s)
		return nil
	}
	storeConf := maps.Clone(cfg.MetadataStoreConfig)
	storeName := strings.TrimSpace(cfg.MetadataStore)
	if cfg.ControllerQuorumVoters != "" && storeName == "local" {
		storeName = "raft" // a quorum means a cluster: the replicated store
	}
	if cfg.ZookeeperConnect != "" && storeName == "local" {
		storeName = "zookeeper" // as Kafka: zookeeper.connect names the store
	}
	if roles, err := cfg.Roles(); err == nil && !roles.Controller && storeName != "raft" {
		return nil, errors.New("process.roles broker: the metadata quorum's voters are required (controller.quorum.voters, --quorum-voters)")
	}
	if storeName == "raft" {
		conf, err := raftStoreConfig(cfg, storeConf)
		if err != nil {
			return nil, err
		}
		storeConf = conf
	}
	if storeName == "zookeeper" {
		storeConf = zookeeperStoreConfig(cfg, storeConf)
		if storeConf["connect"] == nil {
			return nil, errors.New("metadata.store zookeeper: zookeeper.connect (h:p,h:p/chroot) is required")
		}
	}
	if storeName == "etcd" && storeConf["endpoints"] == nil {
		return nil, errors.New("metadata.store etcd: metadata.store.config endpoints (h:p,h:p) is required")
	}
	if storeName == "local" && storeConf["path"] == nil {
		if storeConf == nil {
			storeConf = map[string]any{}
		}
		dir, err := filepath.Abs(cfg.LogDirs)
		if err != nil {
			return nil, fmt.Errorf("plugins: log.dirs: %w", err)
		}
		storeConf["path"] = filepath.Join(dir, "meta", "local.db")
	}
	if err := add("metadata.store", serve.KindMetadataStore, storeName, storeConf); err != nil {
		return nil, err
	}
	lists := []struct {
		key, confKey, kind string
		entries            []string
		confs              map[string]map[string]any
	}{
		{"group.consumer.assignors", "group.consumer.assignor.config", serve.KindAssignor, config.SplitList(cfg.GroupConsumerAssignors), cfg.GroupConsumerAssignorConfig},
		{"sasl.authenticators", "sasl.authenticator.config", serve.KindAuthenticator, config.SplitList(cfg.SaslAuthenticators), cfg.SaslAuthenticatorConfig},
	}
	for _, l := range lists {
		for _, e := range l.entries {
			if err := add(l.key, l.kind, e, l.confs[e]); err != nil {
				return nil, err
			}
		}
		for name := range l.confs {
			if !strings.Contains(","+strings.Join(l.entries, ",")+",", ","+name+",") {
				return nil, fmt.Errorf("%s: config for %q, which %s does not list", l.confKey, name, l.key)
			}
		}
	}
	return specs, nil
}

// loadedPlugins are the sdk values the broker gets.
type loadedPlugins struct {
	store          sdk.MetadataStore
	assignors      []sdk.Assignor
	authenticators []sdk.Authenticator
}

// loadPlugins starts every plugin the config names, in parallel, and
// returns them in config order. On error the caller closes h.
func loadPlugins(ctx context.Context, h *host.Host, cfg config.Broker) (loadedPlugins, error) {
	specs, err := pluginSpecs(cfg)
	if err != nil {
		return loadedPlugins{}, err
	}
	// The store first: authenticators borrow it (sdk.StoreReader) to read
	// credentials. specs[0] is the store (pluginSpecs).
	ps := make([]*host.Plugin, len(specs))
	errs := make([]error, len(specs))
	if ps[0], errs[0] = h.Load(ctx, specs[0]); errs[0] != nil {
		return loadedPlugins{}, errs[0]
	}
	var wg sync.WaitGroup
	for i, s := range specs[1:] {
		if s.Kind == serve.KindAuthenticator {
			s.Store = ps[0].MetadataStore()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i+1], errs[i+1] = h.Load(ctx, s)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return loadedPlugins{}, err
	}
	var out loadedPlugins
	for _, p := range ps {
		switch p.Spec().Kind {
		case serve.KindMetadataStore:
			out.store = p.MetadataStore()
		case serve.KindAssignor:
			out.assignors = append(out.assignors, p.Assignor())
		case serve.KindAuthenticator:
			out.authenticators = append(out.authenticators, p.Authenticator())
		}
	}
	if out.assignors == nil {
		out.assignors = []sdk.Assignor{} // none, not the broker's in-process defaults
	}
	return out, nil
}

// checkInProcess refuses configs --in-process-plugins cannot honour: the
// broker embeds only the local store (at its default path) and the
// built-in assignors.
func checkInProcess(cfg config.Broker) error {
	if cfg.MetadataStore != "local" || len(cfg.MetadataStoreConfig) > 0 || cfg.SaslAuthenticators != "" ||
		len(cfg.GroupConsumerAssignorConfig) > 0 || strings.Contains(cfg.GroupConsumerAssignors, "/") {
		return errors.New("only the default local store and built-in assignors without config can run in process")
	}
	return nil
}

// raftStoreConfig fills the built-in raft store's config from the broker's
// keys, leaving what metadata.store.config sets explicitly.
func raftStoreConfig(cfg config.Broker, conf map[string]any) (map[string]any, error) {
	if conf == nil {
		conf = map[string]any{}
	}
	if cfg.ControllerQuorumVoters == "" && conf["voters"] == nil {
		return nil, errors.New("metadata.store raft: controller.quorum.voters (--quorum-voters) is required")
	}
	setDefault := func(k string, v any) {
		if _, ok := conf[k]; !ok {
			conf[k] = v
		}
	}
	dir, err := filepath.Abs(cfg.LogDirs)
	if err != nil {
		return nil, fmt.Errorf("plugins: log.dirs: %w", err)
	}
	setDefault("node.id", cfg.NodeID)
	setDefault("data.dir", filepath.Join(dir, "meta", "raft"))
	if cfg.ControllerQuorumVoters != "" {
		setDefault("voters", cfg.ControllerQuorumVoters)
	}
	if cfg.ControllerQuorumListen != "" {
		setDefault("quorum.listen", cfg.ControllerQuorumListen)
	}
	if cfg.QuorumTLS() {
		// controller.quorum.security.protocol=SSL: mutual TLS between the
		// quorum's nodes with the broker's own keystore and truststore.
		for k, v := range map[string]string{
			"ssl.keystore.location":          cfg.SslKeystoreLocation,
			"ssl.keystore.certificate.chain": cfg.SslKeystoreCertificateChain,
			"ssl.keystore.key":               cfg.SslKeystoreKey,
			"ssl.key.password":               cfg.SslKeyPassword,
			"ssl.truststore.location":        cfg.SslTruststoreLocation,
			"ssl.truststore.certificates":    cfg.SslTruststoreCertificates,
		} {
			if v != "" {
				if k == "ssl.keystore.location" || k == "ssl.truststore.location" {
					if abs, err := filepath.Abs(v); err == nil {
						v = abs
					}
				}
				setDefault(k, v)
			}
		}
		if strings.TrimSpace(cfg.SslEndpointIdentificationAlgorithm) == "" {
			setDefault("ssl.endpoint.identification.algorithm", "none")
		}
	}
	roles, err := cfg.Roles()
	if err != nil {
		return nil, err
	}
	if !roles.Controller {
		// process.roles=broker: follow the quorum's log as a raft
		// non-voter, which the voters reach at quorum.listen.
		setDefault("non.voter", true)
		if conf["quorum.listen"] == nil {
			return nil, errors.New("process.roles broker: controller.quorum.listen (--quorum-listen) is required: the voters send the metadata log there")
		}
	}
	return conf, nil
}

// zookeeperStoreConfig fills the built-in zookeeper store's config from
// Kafka's keys, leaving what metadata.store.config sets explicitly.
func zookeeperStoreConfig(cfg config.Broker, conf map[string]any) map[string]any {
	if conf == nil {
		conf = map[string]any{}
	}
	if _, ok := conf["connect"]; !ok && cfg.ZookeeperConnect != "" {
		conf["connect"] = cfg.ZookeeperConnect
	}
	if _, ok := conf["session.timeout"]; !ok {
		ms := cfg.ZookeeperSessionTimeoutMs
		if ms <= 0 {
			ms = cfg.BrokerSessionTimeoutMs
		}
		conf["session.timeout"] = (time.Duration(ms) * time.Millisecond).String()
	}
	return conf
}

// sharedStore reports whether the config selects a metadata store kept
// outside the brokers, which several brokers share as one cluster.
func sharedStore(cfg config.Broker) bool {
	switch strings.TrimSpace(cfg.MetadataStore) {
	case "zookeeper", "etcd":
		return true
	case "local":
		return cfg.ZookeeperConnect != "" && cfg.ControllerQuorumVoters == ""
	}
	return false
}
