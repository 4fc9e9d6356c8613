package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/plugins/sdk"
)

// tlsFixture is a CA, a server certificate and client certificates from
// the CA and from another CA.
type tlsFixture struct {
	ca, other          *tlstest.CA
	server, alice, eve tlstest.Cert
}

func newTLSFixture(t testing.TB) *tlsFixture {
	f := &tlsFixture{ca: tlstest.NewCA(t, "Test CA"), other: tlstest.NewCA(t, "Other CA")}
	f.server = f.ca.Issue(pkix.Name{CommonName: "broker"})
	f.alice = f.ca.Issue(pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}})
	f.eve = f.other.Issue(pkix.Name{CommonName: "eve"})
	return f
}

func (f *tlsFixture) serverConfig(t testing.TB, clientAuth string) *tls.Config {
	t.Helper()
	c, err := tlsconf.Files{KeystoreLocation: f.server.Keystore, TruststoreLocation: f.ca.CertFile}.Server(clientAuth)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientConfig trusts the fixture's CA and presents cert, if any.
func (f *tlsFixture) clientConfig(t testing.TB, cert *tlstest.Cert) *tls.Config {
	t.Helper()
	files := tlsconf.Files{TruststoreLocation: f.ca.CertFile, VerifyHostname: true}
	if cert != nil {
		files.KeystoreLocation = cert.Keystore
	}
	c, err := files.Client()
	if err != nil {
		t.Fatal(err)
	}
	c.ServerName = "127.0.0.1"
	return c
}

// startTLSServer serves h on a TLS listener configured by lc.
func startTLSServer(t testing.TB, lc ListenerConfig, h Handler) (*Server, string, *logSink) {
	t.Helper()
	logs := &logSink{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{ZeroCopy: true, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, h)
	served := make(chan error, 1)
	go func() { served <- s.ServeListener(l, lc) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("ServeListener returned %v", err)
		}
	})
	return s, l.Addr().String(), logs
}

// whoHandler answers ApiVersions and records the connection it came on.
type whoHandler struct{ last atomic.Pointer[ConnInfo] }

func (h *whoHandler) Handle(ctx context.Context, req *Request) (*Response, error) {
	h.last.Store(req.Conn)
	if req.Key == apiVersionsKey {
		req.Conn.SetAuthenticated(true) // lifts the pre-auth cap (a SASL handler would, once authenticated)
	}
	resp := req.Body.ResponseKind()
	resp.SetVersion(req.Version)
	return &Response{Msg: resp}, nil
}

// askWho sends ApiVersions on c and returns the connection the handler saw.
func askWho(t *testing.T, c net.Conn, h *whoHandler) *ConnInfo {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	if _, err := c.Write(frame(req, 1, "who")); err != nil {
		t.Fatal(err)
	}
	readResponse(t, c)
	return h.last.Load()
}

func dialTLS(t testing.TB, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// TLS 1.3: a client certificate the server refuses shows on the
	// first read, not in the client's handshake.
	return c, nil
}

// A verified client certificate names the principal through the mapping
// rules; no certificate leaves the connection ANONYMOUS; a certificate
// from another CA is refused in the handshake.
func TestTLSClientCertificatePrincipal(t *testing.T) {
	f := newTLSFixture(t)
	rules, err := tlsconf.ParseRules(`RULE:^CN=(.*?),OU=eng,.*$/$1/U,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	h := &whoHandler{}
	_, addr, logs := startTLSServer(t, ListenerConfig{
		Name: "EXTERNAL", Protocol: "SSL", TLS: f.serverConfig(t, "requested"),
		Principal: func(c *x509.Certificate) (sdk.Principal, error) {
			n, err := rules.PrincipalName(c)
			return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: n}, err
		},
	}, h)

	c, err := dialTLS(t, addr, f.clientConfig(t, &f.alice))
	if err != nil {
		t.Fatal(err)
	}
	got := askWho(t, c, h)
	if got.Principal.String() != "User:ALICE" || got.Listener != "EXTERNAL" || got.Protocol != "SSL" || got.TLS == nil {
		t.Errorf("with a client certificate: principal %s listener %s protocol %s tls %v", got.Principal, got.Listener, got.Protocol, got.TLS != nil)
	}

	c, err = dialTLS(t, addr, f.clientConfig(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := askWho(t, c, h); got.Principal != sdk.Anonymous {
		t.Errorf("without a client certificate: principal %s, want %s", got.Principal, sdk.Anonymous)
	}

	cc := f.clientConfig(t, nil)
	eve, err := tls.X509KeyPair(f.eve.CertPEM, f.eve.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// Present it whatever CAs the server names (Go's client would
	// otherwise stay silent and connect as ANONYMOUS).
	cc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &eve, nil }
	if c, err := dialTLS(t, addr, cc); err == nil {
		expectClosed(t, c)
	}
	logs.waitFor(t, "TLS handshake failed")
}

// With client auth required, a client without a certificate is refused;
// with DEFAULT rules the principal is the whole subject, most specific
// attribute first.
func TestTLSClientAuthRequired(t *testing.T) {
	f := newTLSFixture(t)
	rules, _ := tlsconf.ParseRules("")
	h := &whoHandler{}
	_, addr, logs := startTLSServer(t, ListenerConfig{
		Name: "SSL", TLS: f.serverConfig(t, "required"),
		Principal: func(c *x509.Certificate) (sdk.Principal, error) {
			n, err := rules.PrincipalName(c)
			return sdk.Principal{Type: sdk.PrincipalTypeUser, Name: n}, err
		},
	}, h)
	if c, err := dialTLS(t, addr, f.clientConfig(t, nil)); err == nil {
		expectClosed(t, c)
	}
	logs.waitFor(t, "TLS handshake failed")
	c, err := dialTLS(t, addr, f.clientConfig(t, &f.alice))
	if err != nil {
		t.Fatal(err)
	}
	if got := askWho(t, c, h); got.Principal.String() != "User:CN=alice,OU=eng,O=Example" || got.Protocol != "SSL" {
		t.Errorf("principal %s protocol %s", got.Principal, got.Protocol)
	}
}

// A plaintext client on a TLS listener gets no Kafka response: the
// handshake fails and the connection closes.
func TestTLSListenerRefusesPlaintext(t *testing.T) {
	f := newTLSFixture(t)
	h := &whoHandler{}
	_, addr, logs := startTLSServer(t, ListenerConfig{Name: "SSL", TLS: f.serverConfig(t, "none")}, h)
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	c.Write(frame(req, 1, "plain"))
	expectClosed(t, c)
	logs.waitFor(t, "TLS handshake failed")
	if h.last.Load() != nil {
		t.Error("the handler saw a request of a plaintext client on a TLS listener")
	}
}

// Fetched file ranges go out through the copying path on TLS (sendfile
// would bypass the encryption), intact.
func TestTLSFetchCopies(t *testing.T) {
	f := newTLSFixture(t)
	seg, content := segmentFile(t, 1<<20)
	var done atomic.Int64
	s, addr, _ := startTLSServer(t, ListenerConfig{Name: "SSL", TLS: f.serverConfig(t, "none")}, fetchHandler(seg, &done))
	c, err := dialTLS(t, addr, f.clientConfig(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := roundTrip(c, seg, content, 13, testSpans, 1); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.SendfileCalls != 0 || st.CopiedFileBytes == 0 {
		t.Fatalf("stats %+v: want copies, no sendfile", st)
	}
}

// Before the handler marks the connection authenticated, frames over
// PreAuthMaxRequestBytes close it; after, the usual limit applies.
func TestPreAuthFrameCap(t *testing.T) {
	h := &whoHandler{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	s := NewServer(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}, h)
	served := make(chan error, 1)
	go func() {
		served <- s.ServeListener(l, ListenerConfig{Name: "SASL_PLAINTEXT", Protocol: "SASL_PLAINTEXT", PreAuthMaxRequestBytes: 64})
	}()
	t.Cleanup(func() { s.Close(); <-served })

	big := kmsg.NewPtrMetadataRequest()
	big.Version = 1
	for i := 0; i < 10; i++ {
		big.Topics = append(big.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(strings.Repeat("t", 20))})
	}
	c := dial(t, l.Addr().String())
	c.Write(frame(big, 1, "pre"))
	expectClosed(t, c)
	logs.waitFor(t, "sasl.server.max.receive.size")
	if h.last.Load() != nil {
		t.Error("the handler saw the oversized pre-authentication frame")
	}

	c = dial(t, l.Addr().String())
	askWho(t, c, h) // whoHandler authenticates on ApiVersions
	if _, err := c.Write(frame(big, 2, "post")); err != nil {
		t.Fatal(err)
	}
	readResponse(t, c)
	if got := h.last.Load(); got.Protocol != "SASL_PLAINTEXT" {
		t.Errorf("protocol %q", got.Protocol)
	}
}
