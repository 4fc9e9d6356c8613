package zookeeper

import (
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
	"github.com/vltava/vltava/plugins/sdk"
)

// TestTLS: the store talks to ZooKeeper's TLS client port when given the
// CA, and refuses a server whose certificate it cannot verify.
func TestTLS(t *testing.T) {
	zktest.SkipIfMissing(t)
	authority := tlstest.NewCA(t, "vltava test CA")
	ca := authority.CertFile
	ks := authority.Issue(pkix.Name{CommonName: "zookeeper"}, "127.0.0.1").Keystore
	e := zktest.StartTLS(t, 1, &zktest.TLS{KeyStore: ks, TrustStore: ca})
	s := openStore(t, e, Config{Connect: e.SecureConnect() + "/tls", TLSCAFile: ca})
	if _, err := s.Put(t.Context(), &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	other := tlstest.NewCA(t, "another CA").CertFile
	bad, err := Open(t.Context(), Config{Connect: e.SecureConnect() + "/tls", TLSCAFile: other, SessionTimeout: testSessionTimeout, RequestTimeout: 3 * time.Second}, nil)
	if err == nil {
		bad.Close()
		t.Fatal("opened a TLS ZooKeeper whose certificate is signed by an untrusted CA")
	}
}
