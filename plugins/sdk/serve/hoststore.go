package serve

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// The broker's store, lent to authenticators.
//
// An authenticator that implements sdk.StoreReader gets a read-only view
// of the broker's metadata store under sdk.SecurityPrefix. The host
// serves the view on a go-plugin broker stream (id hostStoreID) that it
// opens right after dispensing the plugin, before Configure; the plugin
// side dials it when Configure arrives (go-plugin hands the connection
// info over within five seconds) and calls UseStore before the plugin's
// own Configure. The view speaks the same MetadataStore service as a
// store plugin, so the sdk.MetadataStore the plugin gets is the usual
// client adapter, with the usual errors (sdk.ErrUnavailable while the
// broker's store is down).

// hostStoreID is the go-plugin broker stream of the store view.
const hostStoreID = 0x564c5453 // "VLTS"

// Dispensed is what a host gets from go-plugin for a plugin: the gRPC
// connection to it and the go-plugin broker for services the host lends
// it.
type Dispensed struct {
	Conn   *grpc.ClientConn
	broker *plugin.GRPCBroker
}

// ServeStore lends store, restricted to a read-only view of
// sdk.SecurityPrefix, to the authenticator plugin behind d (see
// sdk.StoreReader). A nil store is a view whose every call fails with
// sdk.ErrUnavailable. It returns stop, which ends the serving goroutine
// and waits for it; the host calls it when the process goes.
func ServeStore(d *Dispensed, store sdk.MetadataStore) (stop func(), err error) {
	ln, err := d.broker.Accept(hostStoreID)
	if err != nil {
		return nil, fmt.Errorf("serve: lending the store: %w", err)
	}
	srv := grpc.NewServer()
	pluginpb.RegisterMetadataStoreServer(srv, &metadataStoreServer{impl: &securityView{store: store}})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.Serve(ln)
	}()
	return func() { srv.Stop(); ln.Close(); wg.Wait() }, nil
}

// dialHostStore is the plugin side: the store the host lends.
func dialHostStore(b *plugin.GRPCBroker) (sdk.MetadataStore, error) {
	if b == nil {
		return nil, fmt.Errorf("serve: no go-plugin broker to reach the host's store: %w", sdk.ErrUnavailable)
	}
	cc, err := b.Dial(hostStoreID)
	if err != nil {
		return nil, fmt.Errorf("serve: reaching the host's store: %w", err)
	}
	return NewMetadataStoreClient(hostStoreConn{cc}, false), nil
}

type hostStoreConn struct{ cc *grpc.ClientConn }

func (c hostStoreConn) Conn() (grpc.ClientConnInterface, error) { return c.cc, nil }
func (c hostStoreConn) String() string                          { return "the broker's metadata store" }

// securityView is the read-only view of a store's sdk.SecurityPrefix.
type securityView struct{ store sdk.MetadataStore }

func (v *securityView) check(key string) error {
	if v.store == nil {
		return fmt.Errorf("serve: the broker lent no metadata store: %w", sdk.ErrUnavailable)
	}
	if !strings.HasPrefix(key, sdk.SecurityPrefix) {
		return fmt.Errorf("serve: key %q is outside %s, the part of the store an authenticator may read: %w", key, sdk.SecurityPrefix, sdk.ErrInvalidArgument)
	}
	return nil
}

func readOnly() error {
	return fmt.Errorf("serve: an authenticator's view of the store is read-only: %w", sdk.ErrInvalidArgument)
}

func (v *securityView) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	if err := v.check(req.Key); err != nil {
		return nil, err
	}
	return v.store.Get(ctx, req)
}

func (v *securityView) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	if err := v.check(req.Prefix); err != nil {
		return nil, err
	}
	return v.store.List(ctx, req)
}

func (v *securityView) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	if err := v.check(req.Prefix); err != nil {
		return nil, err
	}
	return v.store.Watch(ctx, req)
}

func (v *securityView) Put(context.Context, *sdk.PutRequest) (*sdk.PutResponse, error) {
	return nil, readOnly()
}
func (v *securityView) Delete(context.Context, *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	return nil, readOnly()
}
func (v *securityView) Txn(context.Context, *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	return nil, readOnly()
}
func (v *securityView) GrantSession(context.Context, *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	return nil, readOnly()
}
func (v *securityView) KeepAlive(context.Context, *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	return nil, readOnly()
}
func (v *securityView) RevokeSession(context.Context, *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	return nil, readOnly()
}

// Close does not close the lent store: the broker owns it.
func (v *securityView) Close() error { return nil }
