package etcd

import (
	"context"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/sdk"
)

// TestTLS: the store talks to an etcd serving TLS when given its CA, and
// refuses a server whose certificate it cannot verify.
func TestTLS(t *testing.T) {
	etcdtest.SkipIfMissing(t)
	ca := tlstest.NewCA(t, "vltava test CA")
	srv := ca.Issue(pkix.Name{CommonName: "etcd"}, "127.0.0.1")
	c := etcdtest.StartTLS(t, 1, &etcdtest.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, Config{Endpoints: c.Endpoints(), TLSCAFile: ca.CertFile}, nil)
	if err != nil {
		t.Fatalf("open over TLS: %v", err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	// Trusting only another CA, the handshake fails.
	other := tlstest.NewCA(t, "another CA").CertFile
	if bad, err := Open(ctx, Config{Endpoints: c.Endpoints(), TLSCAFile: other, DialTimeout: 3 * time.Second}, nil); err == nil {
		bad.Close()
		t.Fatal("opened a TLS etcd whose certificate is signed by an untrusted CA")
	}
}
