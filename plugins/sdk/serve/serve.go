package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// Versioner is implemented by a plugin that reports its own version
// (shown by `vltavad plugins`). Without it the main module's version from
// the build info is used.
type Versioner interface {
	Version() string
}

// Assignor serves a partition assignor from a plugin's main. It blocks
// until the host stops the plugin, then exits the process.
func Assignor(impl sdk.Assignor) {
	run(KindAssignor, impl.Name(), impl, func(s *grpc.Server) {
		pluginpb.RegisterAssignorServer(s, &assignorServer{impl: impl})
	})
}

// Authenticator serves an authenticator from a plugin's main. It blocks
// until the host stops the plugin, then exits the process.
func Authenticator(impl sdk.Authenticator) {
	run(KindAuthenticator, KindAuthenticator, impl, func(s *grpc.Server) {
		pluginpb.RegisterAuthenticatorServer(s, &authenticatorServer{impl: impl})
	})
}

// MetadataStore serves a metadata store from a plugin's main. It blocks
// until the host stops the plugin, closes the store, then exits the
// process.
func MetadataStore(impl sdk.MetadataStore) {
	run(KindMetadataStore, KindMetadataStore, impl, func(s *grpc.Server) {
		pluginpb.RegisterMetadataStoreServer(s, &metadataStoreServer{impl: impl})
	})
}

// run serves one plugin until the host stops it or the parent dies.
func run(kind, name string, impl any, register func(*grpc.Server)) {
	stderr := os.Stderr // go-plugin swaps os.Stderr for a pipe; keep fd 2
	slog.SetDefault(slog.New(newLineHandler(stderr)))
	go watchParent(os.Getppid(), time.Second, func() {
		slog.Error("parent process is gone; exiting")
		closeImpl(impl)
		os.Exit(1)
	})
	ctrl := &controlServer{kind: kind, name: name, impl: impl}
	gp := &grpcPlugin{register: func(s *grpc.Server) {
		pluginpb.RegisterControlServer(s, ctrl)
		register(s)
	}}
	ctrl.plugin = gp
	version := servedProtocol()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake(version),
		VersionedPlugins: map[int]plugin.PluginSet{version: {kind: gp}},
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           hclog.New(&hclog.LoggerOptions{Output: stderr, Level: hclog.Warn, JSONFormat: true}),
	})
	closeImpl(impl)
	os.Exit(0)
}

func closeImpl(impl any) {
	if c, ok := impl.(io.Closer); ok {
		if err := c.Close(); err != nil {
			slog.Error("close", "err", err)
		}
	}
}

// watchParent calls gone once the process's parent is no longer ppid:
// when a parent dies its children are re-parented (to init or a
// subreaper), so the parent pid changes. Polling is portable across Unix
// systems and needs no cooperation from the parent.
func watchParent(ppid int, every time.Duration, gone func()) {
	for {
		if os.Getppid() != ppid || ppid == 1 {
			gone()
			return
		}
		time.Sleep(every)
	}
}

// newLineHandler logs JSON lines in the shape go-plugin and the host
// understand: @level, @message, @timestamp, then the attributes.
func newLineHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				a.Key = "@timestamp"
			case slog.LevelKey:
				return slog.String("@level", levelName(a.Value.Any()))
			case slog.MessageKey:
				a.Key = "@message"
			}
			return a
		},
	})
}

func levelName(v any) string {
	l, _ := v.(slog.Level)
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// controlServer answers Info and Configure for every kind.
type controlServer struct {
	pluginpb.UnimplementedControlServer
	kind, name string
	impl       any
	plugin     *grpcPlugin

	lendOnce sync.Once
	lendErr  error
}

func (c *controlServer) Info(context.Context, *pluginpb.InfoRequest) (*pluginpb.InfoResponse, error) {
	_, compactor := c.impl.(sdk.Compactor)
	_, filter := c.impl.(sdk.ConnFilter)
	return &pluginpb.InfoResponse{
		Kind:        c.kind,
		Name:        c.name,
		Version:     pluginVersion(c.impl),
		Compactor:   compactor && c.kind == KindMetadataStore,
		SdkProtocol: int32(servedProtocol()),
		ConnFilter:  filter && c.kind == KindAuthenticator,
	}, nil
}

func (c *controlServer) Configure(ctx context.Context, req *pluginpb.ConfigureRequest) (*pluginpb.ConfigureResponse, error) {
	raw, err := decodeConfigPayload(req.Json)
	if err != nil {
		return nil, toStatus(err)
	}
	if sr, ok := c.impl.(sdk.StoreReader); ok && c.kind == KindAuthenticator {
		c.lendOnce.Do(func() {
			var store sdk.MetadataStore
			if store, c.lendErr = dialHostStore(c.plugin.broker); c.lendErr == nil {
				sr.UseStore(store)
			}
		})
		if c.lendErr != nil {
			return nil, toStatus(c.lendErr)
		}
	}
	cf, ok := c.impl.(Configurer)
	if !ok {
		if len(raw) > 0 {
			keys := make([]string, 0, len(raw))
			for k := range raw {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, toStatus(fmt.Errorf("config: the plugin takes no config, got key(s) %s: %w", quoteAll(keys), sdk.ErrInvalidArgument))
		}
		return &pluginpb.ConfigureResponse{}, nil
	}
	if err := cf.Configure(ctx, raw); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.ConfigureResponse{}, nil
}

func pluginVersion(impl any) string {
	if v, ok := impl.(Versioner); ok {
		return v.Version()
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
