package serve

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// storeUser is an authenticator that keeps the store it is lent.
type storeUser struct {
	*Sessions
	store sdk.MetadataStore
}

func (s *storeUser) UseStore(st sdk.MetadataStore) { s.store = st }

// TestStoreLentToAuthenticator: an sdk.StoreReader authenticator gets,
// through the go-plugin broker, a view of the host's store that reads
// under sdk.SecurityPrefix and nothing else.
func TestStoreLentToAuthenticator(t *testing.T) {
	st, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, k := range []string{sdk.SecurityPrefix + "scram/alice/SCRAM-SHA-512", "/topics/secret"} {
		if _, err := st.Put(ctx, &sdk.PutRequest{Key: k, Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	impl := &storeUser{Sessions: Mechanisms(Plain(nil))}
	ctrl := &controlServer{kind: KindAuthenticator, name: KindAuthenticator, impl: impl}
	gp := &grpcPlugin{register: func(s *grpc.Server) {
		pluginpb.RegisterControlServer(s, ctrl)
		pluginpb.RegisterAuthenticatorServer(s, &authenticatorServer{impl: impl})
	}}
	ctrl.plugin = gp
	client, _ := plugin.TestPluginGRPCConn(t, false, plugin.PluginSet{KindAuthenticator: gp})
	defer client.Close()
	raw, err := client.Dispense(KindAuthenticator)
	if err != nil {
		t.Fatal(err)
	}
	d := raw.(*Dispensed)
	stop, err := ServeStore(d, st)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := Configure(ctx, d.Conn, nil); err != nil {
		t.Fatal(err)
	}
	if impl.store == nil {
		t.Fatal("UseStore was not called before Configure returned")
	}
	got, err := impl.store.Get(ctx, &sdk.GetRequest{Key: sdk.SecurityPrefix + "scram/alice/SCRAM-SHA-512"})
	if err != nil || string(got.Value) != "v" {
		t.Fatalf("Get under the prefix: %v %v", got, err)
	}
	if _, err := impl.store.Get(ctx, &sdk.GetRequest{Key: "/topics/secret"}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("Get outside the prefix: %v, want sdk.ErrInvalidArgument", err)
	}
	if _, err := impl.store.List(ctx, &sdk.ListRequest{Prefix: ""}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("List of everything: %v, want sdk.ErrInvalidArgument", err)
	}
	if _, err := impl.store.Put(ctx, &sdk.PutRequest{Key: sdk.SecurityPrefix + "x", Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("Put: %v, want sdk.ErrInvalidArgument", err)
	}
}
