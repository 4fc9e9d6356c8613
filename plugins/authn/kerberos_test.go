package authn_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	fkerberos "github.com/twmb/franz-go/pkg/sasl/kerberos"

	"github.com/vltava/vltava/daemon/daemontest"
	"github.com/vltava/vltava/plugins/authn/kerberos/kdctest"
)

// TestKerberosAuthenticator runs vltavad with the kerberos authenticator
// against a real MIT KDC and authenticates franz-go, sarama and kcat
// (librdkafka through Cyrus SASL, which asks for mutual authentication).
func TestKerberosAuthenticator(t *testing.T) {
	kdc := kdctest.Start(t)
	// The broker is reached as 127.0.0.1 (clients build the service
	// principal from the host they dial) or localhost.
	kdc.Kadmin(t, "addprinc -randkey kafka/127.0.0.1")
	kdc.Kadmin(t, "addprinc -randkey kafka/localhost")
	kdc.Kadmin(t, "addprinc -randkey other/127.0.0.1")
	brokerKT := filepath.Join(kdc.Dir, "broker.keytab")
	kdc.Kadmin(t, "ktadd -k "+brokerKT+" kafka/127.0.0.1 kafka/localhost")
	aliceKT := kdc.AddPrincipal(t, "alice")

	bin := daemontest.Build(t)
	b := startSASL(t, bin, t.TempDir(), "kerberos", fmt.Sprintf(`sasl.enabled.mechanisms: GSSAPI
sasl.authenticator.config:
  kerberos:
    keytab: %s
    sasl.kerberos.service.name: kafka
`, brokerKT))

	cfg, err := krbconfig.Load(kdc.Krb5Conf)
	if err != nil {
		t.Fatal(err)
	}
	kt, err := keytab.Load(aliceKT)
	if err != nil {
		t.Fatal(err)
	}
	newClient := func() *client.Client {
		cl := client.NewWithKeytab("alice", kdctest.Realm, kt, cfg, client.DisablePAFXFAST(true))
		t.Cleanup(cl.Destroy)
		return cl
	}

	t.Run("franz-go", func(t *testing.T) {
		m := fkerberos.Auth{Client: newClient(), Service: "kafka", PersistAfterAuth: true}.AsMechanism()
		if err := franzRoundTrip(t, b.addr, m, "krb-franz"); err != nil {
			t.Fatal(err)
		}
		wrong := fkerberos.Auth{Client: newClient(), Service: "other", PersistAfterAuth: true}.AsMechanism()
		if err := franzRefused(t, b.addr, wrong); err != nil {
			t.Errorf("wrong service name: %v", err)
		}
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(b.out.String(), "ticket is for service other/127.0.0.1"); {
			if time.Now().After(deadline) {
				t.Fatal("the broker log does not say why the wrong service name was refused")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("sarama", func(t *testing.T) {
		sc := sarama.NewConfig()
		sc.Net.SASL.Enable = true
		sc.Net.SASL.Mechanism = sarama.SASLTypeGSSAPI
		sc.Net.SASL.GSSAPI = sarama.GSSAPIConfig{AuthType: sarama.KRB5_KEYTAB_AUTH, KeyTabPath: aliceKT,
			KerberosConfigPath: kdc.Krb5Conf, ServiceName: "kafka", Username: "alice", Realm: kdctest.Realm, DisablePAFXFAST: true}
		sc.Version = sarama.V3_0_0_0
		sc.Producer.Return.Successes = true
		sc.Metadata.Retry.Max = 0
		cl, err := sarama.NewClient([]string{b.addr}, sc)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		p, err := sarama.NewSyncProducerFromClient(cl)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "krb-sarama", Value: sarama.StringEncoder("v")}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Skip("kcat not installed (Debian package kcat)")
		}
		if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/sasl2/libgssapiv2.so"); err != nil {
			t.Skip("Cyrus SASL GSSAPI module not installed (Debian package libsasl2-modules-gssapi-mit)")
		}
		if _, err := exec.LookPath("kinit"); err != nil {
			t.Skip("kinit not installed (Debian package krb5-user)")
		}
		run := func(service string, stdin string, args ...string) (string, error) {
			cmd := exec.CommandContext(ctxT(t, 30*time.Second), kcat, append([]string{"-b", b.addr,
				"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
				"-X", "sasl.kerberos.service.name=" + service, "-X", "sasl.kerberos.keytab=" + aliceKT,
				"-X", "sasl.kerberos.principal=alice@" + kdctest.Realm}, args...)...)
			cmd.Env = append(kdc.Env(), "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "ccache"))
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := run("kafka", "hello\n", "-P", "-t", "krb-kcat"); err != nil {
			t.Fatalf("kcat GSSAPI produce: %v\n%s", err, out)
		}
		out, err := run("kafka", "", "-C", "-t", "krb-kcat", "-o", "beginning", "-c", "1", "-e")
		if err != nil || !strings.Contains(out, "hello") {
			t.Fatalf("kcat GSSAPI consume: %v\n%s", err, out)
		}
		if out, err := run("other", "", "-L", "-m", "5"); err == nil {
			t.Errorf("kcat with the wrong service name listed metadata:\n%s", out)
		}
	})
}
