package raft

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/plugins/sdk"
)

// quorumTLS is the mutual TLS of a node whose certificate is cert, trusting
// ca.
func quorumTLS(t *testing.T, ca *tlstest.CA, cert tlstest.Cert) (server, client *tls.Config) {
	t.Helper()
	f := tlsconf.Files{KeystoreLocation: cert.Keystore, TruststoreLocation: ca.CertFile, VerifyHostname: true}
	server, err := f.Server("required")
	if err != nil {
		t.Fatal(err)
	}
	client, err = f.Client()
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// TestQuorumMutualTLS: voters with certificates from the quorum's CA elect
// a leader and forward writes over TLS; a non-voter whose certificate
// comes from another CA cannot join (it is refused, and the voters log
// why), and neither can a plaintext peer.
func TestQuorumMutualTLS(t *testing.T) {
	ca, other := tlstest.NewCA(t, "quorum CA"), tlstest.NewCA(t, "another CA")
	c := newCluster(t, 4)
	voters := map[int32]string{1: c.voters[1], 2: c.voters[2], 3: c.voters[3]}
	logs := &syncBuffer{}
	for id := int32(1); id <= 3; id++ {
		cfg := c.config(id)
		cfg.Voters = voters
		cfg.ServerTLS, cfg.ClientTLS = quorumTLS(t, ca, ca.Issue(pkix.Name{CommonName: "voter"}))
		if id == 1 {
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
		c.openWith(cfg)
	}
	lead := c.leader()
	var follower *Store
	for _, s := range c.followers() {
		follower = s
	}
	v := putRetrying(t, follower, "/tls", "forwarded") // follower → leader over TLS
	if got := mustGet(t, lead, "/tls"); got.Version != v || string(got.Value) != "forwarded" {
		t.Fatalf("leader reads /tls = %q@%d", got.Value, got.Version)
	}

	// A plaintext peer is refused before its first byte is read.
	conn, err := net.Dial("tcp", c.voters[1])
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("F" + "POST /get HTTP/1.1\r\nHost: x\r\n\r\n"))
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	buf := make([]byte, 64)
	if n, _ := conn.Read(buf); n > 0 && strings.Contains(string(buf[:n]), "HTTP") {
		t.Errorf("a plaintext peer got an HTTP answer: %q", buf[:n])
	}
	conn.Close()

	// A non-voter with a certificate from another CA.
	nvCfg := c.config(4)
	nvCfg.Voters = voters
	nvCfg.NonVoter = true
	nvCfg.QuorumAddr = c.voters[4]
	nvCfg.LeaderWait = 2 * time.Second
	nvCfg.ServerTLS, nvCfg.ClientTLS = quorumTLS(t, ca, other.Issue(pkix.Name{CommonName: "intruder"}))
	nv := c.openWith(nvCfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := nv.Get(ctx, &sdk.GetRequest{Key: "/tls"}); err == nil {
		t.Error("a node with another CA's certificate read the metadata")
	}
	if _, err := nv.Put(ctx, &sdk.PutRequest{Key: "/intruder", Value: []byte("x"), ExpectVersion: sdk.AnyVersion}); err == nil {
		t.Error("a node with another CA's certificate wrote the metadata")
	}
	f := lead.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Configuration().Servers); n != 3 {
		t.Errorf("the quorum has %d members, want the 3 voters: %v", n, f.Configuration().Servers)
	}
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(logs.String(), "refusing quorum connection: TLS handshake failed") {
		if time.Now().After(deadline) {
			t.Fatalf("voter 1 never logged a refused peer; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
