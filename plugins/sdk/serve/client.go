package serve

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// Conn is how a client adapter reaches its plugin process. The host
// implements it: Conn returns the live connection, or an error wrapping
// sdk.ErrUnavailable while the process is down or restarting, so calls
// fail fast instead of waiting.
type Conn interface {
	Conn() (grpc.ClientConnInterface, error)
	// String names the plugin in error messages.
	String() string
}

// Info describes a running plugin.
type Info struct {
	Kind    string // KindAssignor, KindAuthenticator or KindMetadataStore
	Name    string // the assignor's Name; the kind for the others
	Version string // the plugin's own version, "" if unknown
	// Compactor reports a metadata store implementing sdk.Compactor.
	Compactor bool
	// Protocol is the SDK protocol version the plugin was built with.
	Protocol int
	// ConnFilter reports an authenticator implementing sdk.ConnFilter.
	ConnFilter bool
}

// ReadInfo asks a plugin to describe itself.
func ReadInfo(ctx context.Context, cc grpc.ClientConnInterface) (Info, error) {
	resp, err := pluginpb.NewControlClient(cc).Info(ctx, &pluginpb.InfoRequest{})
	if err != nil {
		return Info{}, fromStatus(ctx, label("plugin"), err)
	}
	return Info{Kind: resp.Kind, Name: resp.Name, Version: resp.Version, Compactor: resp.Compactor, Protocol: int(resp.SdkProtocol), ConnFilter: resp.ConnFilter}, nil
}

// Configure sends a plugin its config map (see Configurer). Errors keep
// their identity: a rejected key wraps sdk.ErrInvalidArgument.
func Configure(ctx context.Context, cc grpc.ClientConnInterface, raw map[string]any) error {
	payload, err := encodeConfig(raw)
	if err != nil {
		return err
	}
	_, err = pluginpb.NewControlClient(cc).Configure(ctx, &pluginpb.ConfigureRequest{Json: payload})
	return fromStatus(ctx, label("plugin"), err)
}

// label is a Conn-less name for error messages.
type label string

func (l label) Conn() (grpc.ClientConnInterface, error) {
	return nil, fmt.Errorf("serve: %s: no connection", string(l))
}
func (l label) String() string { return string(l) }
