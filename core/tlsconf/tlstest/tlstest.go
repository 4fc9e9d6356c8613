// Package tlstest makes throwaway certificate authorities and certificates
// for tests, with crypto/x509 (no openssl needed), written as the PEM
// files the broker's ssl.* keys name.
package tlstest

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
)

// CA is a certificate authority.
type CA struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate as a PEM file (a truststore).
	CertFile string
}

// NewCA makes a CA named name whose files go to a test temp dir.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Vltava tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.CertFile = filepath.Join(ca.dir, "ca.pem")
	write(t, ca.CertFile, pemBlock("CERTIFICATE", der))
	return ca
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func write(t testing.TB, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Cert is an issued certificate and its key.
type Cert struct {
	// Keystore is one PEM file with the private key and the certificate
	// (ssl.keystore.location); CertFile and KeyFile hold them apart (for
	// kcat, sarama).
	Keystore, CertFile, KeyFile string
	CertPEM, KeyPEM             []byte
}

// Issue makes a certificate for subject, valid for server and client
// use, for the host names and IP addresses in hosts (127.0.0.1 and
// localhost when none are given).
func (ca *CA) Issue(subject pkix.Name, hosts ...string) Cert {
	t := ca.t
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := Cert{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", kder)}
	f, err := os.CreateTemp(ca.dir, "cert-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	base := f.Name()
	c.Keystore, c.CertFile, c.KeyFile = base+"-keystore.pem", base+"-cert.pem", base+"-key.pem"
	write(t, c.Keystore, append(append([]byte{}, c.KeyPEM...), c.CertPEM...))
	write(t, c.CertFile, c.CertPEM)
	write(t, c.KeyFile, c.KeyPEM)
	return c
}
