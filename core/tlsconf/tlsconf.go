package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vltava/vltava/core/config"
)

// Files names the PEM material of one side of a TLS connection; it is the
// subset of config.Broker the package reads, so that processes without a
// broker config (the raft store plugin) can use it too.
type Files struct {
	KeystoreLocation         string // PEM file: certificate chain and private key
	KeystoreCertificateChain string // inline PEM, instead of KeystoreLocation
	KeystoreKey              string // inline PEM private key
	KeyPassword              string // for a legacy-encrypted key
	TruststoreLocation       string // PEM file: CA certificates
	TruststoreCertificates   string // inline PEM CA certificates
	// VerifyHostname checks the peer's host name against its certificate
	// when dialing (ssl.endpoint.identification.algorithm=https).
	VerifyHostname bool
}

// FilesOf returns the broker's TLS material.
func FilesOf(b config.Broker) Files {
	return Files{
		KeystoreLocation:         b.SslKeystoreLocation,
		KeystoreCertificateChain: b.SslKeystoreCertificateChain,
		KeystoreKey:              b.SslKeystoreKey,
		KeyPassword:              b.SslKeyPassword,
		TruststoreLocation:       b.SslTruststoreLocation,
		TruststoreCertificates:   b.SslTruststoreCertificates,
		VerifyHostname:           strings.EqualFold(strings.TrimSpace(b.SslEndpointIdentificationAlgorithm), "https"),
	}
}

// HasKeystore reports whether a certificate and key are configured.
func (f Files) HasKeystore() bool {
	return f.KeystoreLocation != "" || f.KeystoreCertificateChain != ""
}

// HasTruststore reports whether CA certificates are configured.
func (f Files) HasTruststore() bool {
	return f.TruststoreLocation != "" || f.TruststoreCertificates != ""
}

// Certificate loads the keystore.
func (f Files) Certificate() (tls.Certificate, error) {
	var data []byte
	if f.KeystoreLocation != "" {
		b, err := os.ReadFile(f.KeystoreLocation)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tlsconf: ssl.keystore.location: %w", err)
		}
		data = b
	} else {
		data = []byte(f.KeystoreCertificateChain + "\n" + f.KeystoreKey)
	}
	var cert tls.Certificate
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		switch {
		case blk.Type == "CERTIFICATE":
			cert.Certificate = append(cert.Certificate, blk.Bytes)
		case blk.Type == "ENCRYPTED PRIVATE KEY":
			return tls.Certificate{}, errors.New("tlsconf: keystore: encrypted PKCS#8 private keys are not supported; decrypt it (openssl pkcs8 -in key.pem -out plain.pem) and protect the file instead")
		case strings.HasSuffix(blk.Type, "PRIVATE KEY"):
			if cert.PrivateKey != nil {
				return tls.Certificate{}, errors.New("tlsconf: keystore: more than one private key")
			}
			der := blk.Bytes
			//lint:ignore SA1019 legacy PEM encryption is what ssl.key.password can open
			if x509.IsEncryptedPEMBlock(blk) { //nolint:staticcheck
				if f.KeyPassword == "" {
					return tls.Certificate{}, errors.New("tlsconf: keystore: the private key is encrypted and ssl.key.password is not set")
				}
				var err error
				//lint:ignore SA1019 see above
				if der, err = x509.DecryptPEMBlock(blk, []byte(f.KeyPassword)); err != nil { //nolint:staticcheck
					return tls.Certificate{}, fmt.Errorf("tlsconf: keystore: decrypting the private key: %w", err)
				}
			}
			key, err := parseKey(der)
			if err != nil {
				return tls.Certificate{}, err
			}
			cert.PrivateKey = key
		}
	}
	if len(cert.Certificate) == 0 {
		return tls.Certificate{}, errors.New("tlsconf: keystore: no CERTIFICATE block")
	}
	if cert.PrivateKey == nil {
		return tls.Certificate{}, errors.New("tlsconf: keystore: no PRIVATE KEY block")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: keystore: %w", err)
	}
	cert.Leaf = leaf
	pub, ok := cert.PrivateKey.(interface{ Public() crypto.PublicKey })
	if !ok || !pub.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		return tls.Certificate{}, errors.New("tlsconf: keystore: the private key does not belong to the first certificate")
	}
	return cert, nil
}

func parseKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		switch k.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return k, nil
		}
		return nil, fmt.Errorf("tlsconf: keystore: unsupported private key type %T", k)
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("tlsconf: keystore: the private key is neither PKCS#8, PKCS#1 nor SEC 1")
}

// Roots loads the truststore; nil without one.
func (f Files) Roots() (*x509.CertPool, error) {
	if !f.HasTruststore() {
		return nil, nil
	}
	data := []byte(f.TruststoreCertificates)
	if f.TruststoreLocation != "" {
		b, err := os.ReadFile(f.TruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: ssl.truststore.location: %w", err)
		}
		data = b
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("tlsconf: truststore: no CERTIFICATE block")
	}
	return pool, nil
}

// Server returns the configuration of a TLS listener. clientAuth is
// ssl.client.auth (none, requested or required).
func (f Files) Server(clientAuth string) (*tls.Config, error) {
	cert, err := f.Certificate()
	if err != nil {
		return nil, err
	}
	roots, err := f.Roots()
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: roots, MinVersion: tls.VersionTLS12}
	switch strings.ToLower(clientAuth) {
	case "", config.ClientAuthNone:
		c.ClientAuth = tls.NoClientCert
	case config.ClientAuthRequested:
		c.ClientAuth = tls.VerifyClientCertIfGiven
	case config.ClientAuthRequired:
		if roots == nil {
			return nil, errors.New("tlsconf: ssl.client.auth=required needs a truststore")
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("tlsconf: ssl.client.auth %q: want none, requested or required", clientAuth)
	}
	return c, nil
}

// Client returns the configuration for dialing another broker or quorum
// node: the keystore (if any) as the client certificate, the truststore
// (else the system roots) for the peer's.
func (f Files) Client() (*tls.Config, error) {
	roots, err := f.Roots()
	if err != nil {
		return nil, err
	}
	c := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if f.HasKeystore() {
		cert, err := f.Certificate()
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if !f.VerifyHostname {
		// Verify the chain, not the name: crypto/tls has no switch for
		// that, so verification is done here.
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsconf: peer sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, ic := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return c, nil
}

// SubjectOf is a certificate's subject in RFC 2253 form, its attributes
// in the order the certificate has them, most specific first
// ("CN=alice,OU=eng,O=Example"), as Kafka renders it.
func SubjectOf(c *x509.Certificate) string {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(c.RawSubject, &seq); err != nil || len(rest) > 0 {
		return c.Subject.String()
	}
	return seq.String()
}
