package main

import (
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/daemon/daemontest"
)

// The CLI reaches a broker whose only listener is SSL with client
// certificates required, given -X settings as kcat takes them; without
// them it fails.
func TestCLIOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cli CA")
	server, client := ca.Issue(pkix.Name{CommonName: "broker"}), ca.Issue(pkix.Name{CommonName: "cli"})
	cfg := filepath.Join(t.TempDir(), "tls.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(
		"listener.security.protocol.map: PLAINTEXT:SSL\nssl.keystore.location: %q\nssl.truststore.location: %q\nssl.client.auth: required\n",
		server.Keystore, ca.CertFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := daemontest.Start(t, daemontest.Build(t), "--config", cfg)
	x := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.CertFile,
		"-X", "ssl.certificate.location=" + client.CertFile, "-X", "ssl.key.location=" + client.KeyFile}
	cli(t, p.Addr(), "", append(x, "topic", "create", "secure", "-p", "2")...)
	if out := cli(t, p.Addr(), "", append([]string{"topic", "list"}, x...)...); !strings.Contains(out, "secure") {
		t.Fatalf("topic list over TLS: %q", out)
	}
	if _, _, err := cliErr(t, p.Addr(), "", "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+ca.CertFile, "topic", "list"); err == nil {
		t.Fatal("topic list without a client certificate succeeded")
	}
	if _, _, err := cliErr(t, p.Addr(), "", "-X", "nonsense=1", "topic", "list"); err == nil || !strings.Contains(err.Error(), "unknown setting") {
		t.Fatalf("an unknown -X setting: %v", err)
	}
}
