package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/plugins/sdk"
)

// tlsCerts is a throwaway CA with a broker certificate and client
// certificates from it and from another CA.
type tlsCerts struct {
	ca, other          *tlstest.CA
	broker, alice, eve tlstest.Cert
}

func newTLSCerts(t *testing.T) *tlsCerts {
	c := &tlsCerts{ca: tlstest.NewCA(t, "Vltava test CA"), other: tlstest.NewCA(t, "Another CA")}
	c.broker = c.ca.Issue(pkix.Name{CommonName: "broker"})
	c.alice = c.ca.Issue(pkix.Name{CommonName: "alice", Organization: []string{"Example"}})
	c.eve = c.other.Issue(pkix.Name{CommonName: "eve"})
	return c
}

// tlsBroker serves PLAINTEXT and SSL listeners with the given client auth.
func tlsBroker(t *testing.T, certs *tlsCerts, clientAuth string) *Broker {
	return testBroker(t, func(c *config.Broker) {
		c.Listeners = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
		c.SslKeystoreLocation = certs.broker.Keystore
		c.SslTruststoreLocation = certs.ca.CertFile
		c.SslClientAuth = clientAuth
	})
}

// clientTLS trusts the test CA and presents cert (nil: none).
func (c *tlsCerts) clientTLS(t *testing.T, cert *tlstest.Cert) *tls.Config {
	t.Helper()
	f := tlsconf.Files{TruststoreLocation: c.ca.CertFile, VerifyHostname: true}
	if cert != nil {
		f.KeystoreLocation = cert.Keystore
	}
	tc, err := f.Client()
	if err != nil {
		t.Fatal(err)
	}
	if cert != nil && cert.Keystore == c.eve.Keystore {
		// Present it whatever CAs the broker names.
		eve := tc.Certificates[0]
		tc.Certificates = nil
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &eve, nil }
	}
	return tc
}

// pad makes a few records read together larger than the fetch path's
// copy threshold (pinMinBytes), so they are sent as file ranges.
var pad = strings.Repeat(".", 2000)

// produceConsume writes n records to topic through cl and reads them back.
func produceConsume(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(i) + pad)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cl.AddConsumeTopics(topic)
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if v != "v"+strconv.Itoa(i)+pad {
			t.Fatalf("record %d = %q", i, v)
		}
	}
}

// metadataPort asks for Metadata on cl's seed and returns the port
// advertised for broker 1.
func metadataPort(t *testing.T, cl *kgo.Client) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("metadata lists %d brokers", len(resp.Brokers))
	}
	return resp.Brokers[0].Port
}

func portOf(t *testing.T, addr string) int32 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// franz-go over TLS, with and without a client certificate; each
// listener advertises itself in Metadata; fetches on TLS copy, on
// plaintext they use sendfile.
func TestTLSListenerFranzGo(t *testing.T) {
	certs := newTLSCerts(t)
	b := tlsBroker(t, certs, config.ClientAuthRequested)
	sslAddr, plainAddr := b.ListenerAddr("SSL"), b.ListenerAddr("PLAINTEXT")

	anon := testClient(t, b, kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(certs.clientTLS(t, nil)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if got := metadataPort(t, anon); got != portOf(t, sslAddr) {
		t.Errorf("metadata on SSL advertises port %d, want the SSL listener's %s", got, sslAddr)
	}
	produceConsume(t, anon, "tls-anon", 20)
	if st := b.Stats(); st.SendfileCalls != 0 || st.CopiedFileBytes == 0 {
		t.Errorf("after fetching over TLS: %+v, want copies and no sendfile", st)
	}

	withCert := testClient(t, b, kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(certs.clientTLS(t, &certs.alice)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceConsume(t, withCert, "tls-cert", 20)

	plain := testClient(t, b, kgo.SeedBrokers(plainAddr), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if got := metadataPort(t, plain); got != portOf(t, plainAddr) {
		t.Errorf("metadata on PLAINTEXT advertises port %d, want %s", got, plainAddr)
	}
	produceConsume(t, plain, "plain", 20)
	if st := b.Stats(); st.SendfileCalls == 0 {
		t.Errorf("after fetching over plaintext: %+v, want sendfile", st)
	}
}

// With ssl.client.auth=required, clients without a certificate or with
// one from another CA are refused; a trusted one is served.
func TestTLSClientAuthRequiredFranzGo(t *testing.T) {
	certs := newTLSCerts(t)
	b := tlsBroker(t, certs, config.ClientAuthRequired)
	sslAddr := b.ListenerAddr("SSL")
	for _, tc := range []struct {
		name string
		cert *tlstest.Cert
	}{{"no certificate", nil}, {"another CA", &certs.eve}} {
		cl := testClient(t, b, kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(certs.clientTLS(t, tc.cert)), kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := cl.Ping(ctx)
		cancel()
		if err == nil {
			t.Errorf("%s: ping succeeded, want a refusal", tc.name)
		}
	}
	ok := testClient(t, b, kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(certs.clientTLS(t, &certs.alice)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceConsume(t, ok, "tls-required", 5)
}

// sarama over TLS, with and without a client certificate.
func TestTLSListenerSarama(t *testing.T) {
	certs := newTLSCerts(t)
	b := tlsBroker(t, certs, config.ClientAuthRequested)
	for _, tc := range []struct {
		name string
		cert *tlstest.Cert
	}{{"anonymous", nil}, {"client certificate", &certs.alice}} {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_0_0_0
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = certs.clientTLS(t, tc.cert)
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		topic := "sarama-tls-" + strings.ReplaceAll(tc.name, " ", "-")
		prod, err := sarama.NewSyncProducer([]string{b.ListenerAddr("SSL")}, cfg)
		if err != nil {
			t.Fatalf("%s: producer: %v", tc.name, err)
		}
		for i := range 3 {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("m" + strconv.Itoa(i))}); err != nil {
				t.Fatalf("%s: send: %v", tc.name, err)
			}
		}
		prod.Close()
		cons, err := sarama.NewConsumer([]string{b.ListenerAddr("SSL")}, cfg)
		if err != nil {
			t.Fatalf("%s: consumer: %v", tc.name, err)
		}
		pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("%s: consume: %v", tc.name, err)
		}
		for i := range 3 {
			select {
			case m := <-pc.Messages():
				if string(m.Value) != "m"+strconv.Itoa(i) {
					t.Fatalf("%s: message %d = %q", tc.name, i, m.Value)
				}
			case err := <-pc.Errors():
				t.Fatalf("%s: %v", tc.name, err)
			case <-time.After(15 * time.Second):
				t.Fatalf("%s: message %d not received", tc.name, i)
			}
		}
		pc.Close()
		cons.Close()
	}
}

// kcat (librdkafka) over TLS: with the CA only, and with a client
// certificate when the broker requires one; without one it is refused.
func TestTLSListenerKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (Debian package kcat)")
	}
	certs := newTLSCerts(t)
	run := func(b *Broker, input string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", b.ListenerAddr("SSL"),
			"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + certs.ca.CertFile,
			"-X", "socket.timeout.ms=5000"}, args...)...)
		cmd.Stdin = strings.NewReader(input)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		return out.String(), func() error {
			if err != nil {
				return &kcatErr{err, stderr.String()}
			}
			return nil
		}()
	}
	withCert := []string{"-X", "ssl.certificate.location=" + certs.alice.CertFile, "-X", "ssl.key.location=" + certs.alice.KeyFile}

	b := tlsBroker(t, certs, config.ClientAuthRequested)
	if _, err := run(b, "a\nb\nc\n", "-P", "-t", "kcat-tls"); err != nil {
		t.Fatalf("kcat produce over TLS: %v", err)
	}
	if out, err := run(b, "", "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-q"); err != nil || out != "a\nb\nc\n" {
		t.Fatalf("kcat consume over TLS: %q, %v", out, err)
	}

	req := tlsBroker(t, certs, config.ClientAuthRequired)
	if _, err := run(req, "x\n", append(withCert, "-P", "-t", "kcat-mtls")...); err != nil {
		t.Fatalf("kcat produce with a client certificate: %v", err)
	}
	if out, err := run(req, "", append(withCert, "-C", "-t", "kcat-mtls", "-o", "beginning", "-e", "-q")...); err != nil || out != "x\n" {
		t.Fatalf("kcat consume with a client certificate: %q, %v", out, err)
	}
	if _, err := run(req, "", "-L", "-m", "2"); err == nil {
		t.Fatal("kcat without a client certificate listed metadata from a broker requiring one")
	}
}

type kcatErr struct {
	err    error
	stderr string
}

func (e *kcatErr) Error() string { return e.err.Error() + ": " + e.stderr }

// DescribeConfigs hides the broker's secrets: null values marked
// sensitive.
func TestDescribeConfigsHidesSecrets(t *testing.T) {
	b := testBroker(t, func(c *config.Broker) { c.InterBrokerSaslPassword, c.SslKeyPassword = "hunter2", "hunter3" })
	cl := testClient(t, b)
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, c := range resp.Resources[0].Configs {
		if c.Value != nil && strings.Contains(*c.Value, "hunter") {
			t.Errorf("%s shows %q", c.Name, *c.Value)
		}
		if c.Name == "inter.broker.sasl.password" || c.Name == "ssl.key.password" {
			found++
			if !c.IsSensitive || c.Value != nil {
				t.Errorf("%s: sensitive %v value %v", c.Name, c.IsSensitive, c.Value)
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d of the 2 password keys", found)
	}
}

// SASL_SSL is TLS, then SASL: franz-go with both is served (without a
// client certificate: ssl.client.auth is for SSL listeners), without SASL
// it is refused, and a plaintext client gets nothing.
func TestSASLSSLListener(t *testing.T) {
	certs := newTLSCerts(t)
	b := saslBroker(t, []sdk.Authenticator{newPlainAuth(testUsers)}, func(c *config.Broker) {
		c.Listeners = "SASL_SSL://127.0.0.1:0"
		c.SslKeystoreLocation = certs.broker.Keystore
		c.SslTruststoreLocation = certs.ca.CertFile
		c.SslClientAuth = config.ClientAuthRequired // applies to SSL listeners only, as in Kafka
	})
	cl := testClient(t, b, kgo.DialTLSConfig(certs.clientTLS(t, nil)), plainOpt("alice", "alice-secret"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceConsume(t, cl, "sasl-ssl", 5)
	for name, opts := range map[string][]kgo.Opt{
		"TLS without SASL":     {kgo.DialTLSConfig(certs.clientTLS(t, nil))},
		"SASL without TLS":     {plainOpt("alice", "alice-secret")},
		"TLS and bad password": {kgo.DialTLSConfig(certs.clientTLS(t, nil)), plainOpt("alice", "nope")},
	} {
		bad := testClient(t, b, append(opts, kgo.RequestRetries(0))...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bad)
		cancel()
		if err == nil {
			t.Errorf("%s: metadata answered", name)
		}
	}
}
