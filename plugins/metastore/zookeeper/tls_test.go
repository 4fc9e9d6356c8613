package zookeeper

import (
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

	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
	"github.com/vltava/vltava/plugins/sdk"
)

// writeCerts makes a CA and a server certificate for 127.0.0.1 in dir:
// the CA certificate, and a PEM key store (PKCS#8 key, then certificate)
// as ZooKeeper reads it.
func writeCerts(t *testing.T, dir string) (ca, keyStore string) {
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
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "zookeeper"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	ca = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	keyStore = filepath.Join(dir, "server.pem")
	pemKS := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})...)
	if err := os.WriteFile(keyStore, pemKS, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, keyStore
}

// TestTLS: the store talks to ZooKeeper's TLS client port when given the
// CA, and refuses a server whose certificate it cannot verify.
func TestTLS(t *testing.T) {
	zktest.SkipIfMissing(t)
	dir := t.TempDir()
	ca, ks := writeCerts(t, dir)
	e := zktest.StartTLS(t, 1, &zktest.TLS{KeyStore: ks, TrustStore: ca})
	s := openStore(t, e, Config{Connect: e.SecureConnect() + "/tls", TLSCAFile: ca})
	if _, err := s.Put(t.Context(), &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatalf("Put over TLS: %v", err)
	}
	other, _ := writeCerts(t, t.TempDir())
	bad, err := Open(t.Context(), Config{Connect: e.SecureConnect() + "/tls", TLSCAFile: other, SessionTimeout: testSessionTimeout, RequestTimeout: 3 * time.Second}, nil)
	if err == nil {
		bad.Close()
		t.Fatal("opened a TLS ZooKeeper whose certificate is signed by an untrusted CA")
	}
}
