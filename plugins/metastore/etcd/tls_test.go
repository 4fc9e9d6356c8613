package etcd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/sdk"
)

// writeCerts makes a CA and a server certificate for 127.0.0.1 in dir and
// returns the CA, certificate and key file names.
func writeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vltava test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "etcd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}

// TestTLS: the store talks to an etcd serving TLS when given its CA, and
// refuses a server whose certificate it cannot verify.
func TestTLS(t *testing.T) {
	etcdtest.SkipIfMissing(t)
	ca, cert, key := writeCerts(t, t.TempDir())
	c := etcdtest.StartTLS(t, 1, &etcdtest.TLS{CertFile: cert, KeyFile: key})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, Config{Endpoints: c.Endpoints(), TLSCAFile: ca}, nil)
	if err != nil {
		t.Fatalf("open over TLS: %v", err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	// Trusting only another CA, the handshake fails.
	other, _, _ := writeCerts(t, t.TempDir())
	if bad, err := Open(ctx, Config{Endpoints: c.Endpoints(), TLSCAFile: other, DialTimeout: 3 * time.Second}, nil); err == nil {
		bad.Close()
		t.Fatal("opened a TLS etcd whose certificate is signed by an untrusted CA")
	}
}
