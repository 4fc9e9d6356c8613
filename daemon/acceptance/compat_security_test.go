package acceptance

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	segkafka "github.com/segmentio/kafka-go"
	segsasl "github.com/segmentio/kafka-go/sasl"
	segplain "github.com/segmentio/kafka-go/sasl/plain"
	segscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	fkerberos "github.com/twmb/franz-go/pkg/sasl/kerberos"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/daemon/daemontest"
	"github.com/vltava/vltava/plugins/authn/kerberos/kdctest"
)

// The security columns of the compatibility matrix: each client produces
// the compat values through a SASL or TLS listener of a real vltavad, and
// franz-go reads them back on the broker's PLAINTEXT listener.
var compatSecurity = []string{
	"SASL PLAIN", "SASL SCRAM-SHA-256", "SASL SCRAM-SHA-512", "SASL GSSAPI", "TLS", "TLS client cert", "SASL_SSL SCRAM-SHA-512",
}

const (
	compatUser = "alice"
	compatPass = "alice-compat-secret"
)

// secCell is where and how one security cell connects.
type secCell struct {
	addr      string // the listener the client dials
	plainAddr string // the same broker's PLAINTEXT listener, for reading back
	mechanism string // SASL mechanism, "" on TLS listeners
	user      string
	pass      string
	ca        string       // the CA's PEM file (TLS listeners)
	cert      tlstest.Cert // the client certificate (zero: none)
	krb       *krbClient   // GSSAPI
}

// krbClient is a Kerberos client principal of the test KDC.
type krbClient struct {
	kdc       *kdctest.KDC
	principal string // without the realm
	keytab    string
	service   string
}

func (s secCell) tls() bool { return s.ca != "" }

// tlsConfig is the Go client TLS configuration of a TLS cell.
func (s secCell) tlsConfig() (*tls.Config, error) {
	return tlsconf.Files{KeystoreLocation: s.cert.Keystore, TruststoreLocation: s.ca, VerifyHostname: true}.Client()
}

// compatSecure is the security part of the matrix's run: two brokers
// (the second requires client certificates on its SSL listener) and,
// when MIT Kerberos is installed, a KDC.
type compatSecure struct {
	cells   map[string]secCell
	skipped map[string]string // column → why it cannot run here
}

// listenerDaemon is a vltavad with several named listeners, which
// daemontest.Start (one --listen address) does not make.
type listenerDaemon struct {
	addrs map[string]string // listener name → address
	out   *bytes.Buffer
}

// startListeners runs bin with the listeners named in names (each on a
// free loopback port) and the YAML lines in extra, and waits until every
// listener accepts connections. The process group is killed at cleanup.
func startListeners(t *testing.T, bin string, names []string, extra string) *listenerDaemon {
	t.Helper()
	d := &listenerDaemon{addrs: map[string]string{}, out: &bytes.Buffer{}}
	var ls []string
	for _, n := range names {
		d.addrs[n] = daemontest.FreePort(t)
		ls = append(ls, n+"://"+d.addrs[n])
	}
	cfg := fmt.Sprintf("listeners: %s\nlog.dirs: %s\nmetrics.listen: \"\"\ngroup.initial.rebalance.delay.ms: 0\n%s",
		strings.Join(ls, ","), t.TempDir(), extra)
	path := filepath.Join(t.TempDir(), "vltavad.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "vltavad.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its plugin processes go with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("vltavad (%s) log tail:\n%s", strings.Join(ls, ","), tail(string(b), 60))
		}
	})
	for _, n := range names {
		for deadline := time.Now().Add(60 * time.Second); ; {
			if c, err := net.DialTimeout("tcp", d.addrs[n], time.Second); err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				b, _ := os.ReadFile(logf.Name())
				t.Fatalf("vltavad exited before serving:\n%s", b)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("vltavad did not accept connections on %s", d.addrs[n])
			}
		}
	}
	return d
}

// startCompatSecure starts the brokers (and KDC) of the security columns
// and creates the SCRAM user.
func startCompatSecure(t *testing.T, bin string) *compatSecure {
	t.Helper()
	s := &compatSecure{cells: map[string]secCell{}, skipped: map[string]string{}}
	ca := tlstest.NewCA(t, "compat CA")
	brokerCert := ca.Issue(pkix.Name{CommonName: "broker"})
	clientCert := ca.Issue(pkix.Name{CommonName: compatUser})

	// The KDC is optional: without MIT Kerberos the GSSAPI column is not run.
	var kdc *kdctest.KDC
	authenticators, krbConfig := "simple", ""
	if why := kdcMissing(); why != "" {
		s.skipped["SASL GSSAPI"] = why
	} else {
		kdc = kdctest.Start(t)
		kdc.Kadmin(t, "addprinc -randkey kafka/127.0.0.1")
		kdc.Kadmin(t, "addprinc -randkey kafka/localhost")
		brokerKT := filepath.Join(kdc.Dir, "broker.keytab")
		kdc.Kadmin(t, "ktadd -k "+brokerKT+" kafka/127.0.0.1 kafka/localhost")
		authenticators = "simple,kerberos"
		krbConfig = fmt.Sprintf("sasl.authenticator.config:\n  kerberos:\n    keytab: %s\n    sasl.kerberos.service.name: kafka\n", brokerKT)
	}
	tlsKeys := fmt.Sprintf("ssl.keystore.location: %s\nssl.truststore.location: %s\n", brokerCert.Keystore, ca.CertFile)
	a := startListeners(t, bin, []string{"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"},
		"sasl.authenticators: "+authenticators+"\n"+krbConfig+tlsKeys)
	b := startListeners(t, bin, []string{"PLAINTEXT", "SSL"}, tlsKeys+"ssl.client.auth: required\n")

	// The user, with credentials of both SCRAM mechanisms (PLAIN checks
	// them too).
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addrs["PLAINTEXT"]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(testCtx(t, 30*time.Second), nil, []kadm.UpsertSCRAM{
		{User: compatUser, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: compatPass},
		{User: compatUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: compatPass},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create the SCRAM user: %v", err)
	}

	saslCell := func(mech string) secCell {
		return secCell{addr: a.addrs["SASL_PLAINTEXT"], plainAddr: a.addrs["PLAINTEXT"], mechanism: mech, user: compatUser, pass: compatPass}
	}
	s.cells["SASL PLAIN"] = saslCell("PLAIN")
	s.cells["SASL SCRAM-SHA-256"] = saslCell("SCRAM-SHA-256")
	s.cells["SASL SCRAM-SHA-512"] = saslCell("SCRAM-SHA-512")
	if kdc != nil {
		c := saslCell("GSSAPI")
		c.krb = &krbClient{kdc: kdc, principal: compatUser, keytab: kdc.AddPrincipal(t, compatUser), service: "kafka"}
		s.cells["SASL GSSAPI"] = c
	}
	s.cells["TLS"] = secCell{addr: a.addrs["SSL"], plainAddr: a.addrs["PLAINTEXT"], ca: ca.CertFile}
	s.cells["TLS client cert"] = secCell{addr: b.addrs["SSL"], plainAddr: b.addrs["PLAINTEXT"], ca: ca.CertFile, cert: clientCert}
	s.cells["SASL_SSL SCRAM-SHA-512"] = secCell{addr: a.addrs["SASL_SSL"], plainAddr: a.addrs["PLAINTEXT"], mechanism: "SCRAM-SHA-512",
		user: compatUser, pass: compatPass, ca: ca.CertFile}

	// The cells mean what they say: without credentials or without a
	// certificate the same listeners serve nothing.
	for _, c := range []secCell{
		{addr: a.addrs["SASL_PLAINTEXT"]},
		{addr: b.addrs["SSL"], ca: ca.CertFile},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		opts := []kgo.Opt{kgo.SeedBrokers(c.addr), kgo.RequestRetries(0)}
		if c.tls() {
			tc, err := c.tlsConfig()
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kadm.NewClient(cl).ListTopics(ctx); err == nil {
			t.Errorf("a client without credentials or certificate listed topics on %s", c.addr)
		}
		cl.Close()
		cancel()
	}
	return s
}

// kdcMissing says why kdctest cannot start a KDC here, or "".
func kdcMissing() string {
	for _, p := range []struct{ bin, pkg string }{{"krb5kdc", "krb5-kdc"}, {"kdb5_util", "krb5-kdc"}, {"kadmin.local", "krb5-admin-server"}} {
		found := false
		for _, dir := range []string{"", "/usr/sbin/", "/usr/bin/"} {
			if _, err := exec.LookPath(dir + p.bin); err == nil {
				found = true
			}
		}
		if !found {
			return fmt.Sprintf("%s not installed (Debian package %s)", p.bin, p.pkg)
		}
	}
	return ""
}

// compatProduceValues are the values every security cell produces.
func compatProduceValues() []string {
	var vs []string
	for i := range compatRecords {
		vs = append(vs, compatValue(i))
	}
	return vs
}

// franzSecure produces through a secured listener with franz-go.
func franzSecure(ctx context.Context, s secCell, topic string) error {
	opts := []kgo.Opt{kgo.SeedBrokers(s.addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RetryTimeout(10 * time.Second)}
	if s.tls() {
		tc, err := s.tlsConfig()
		if err != nil {
			return err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s.mechanism != "" {
		var m sasl.Mechanism
		switch s.mechanism {
		case "PLAIN":
			m = plain.Auth{User: s.user, Pass: s.pass}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: s.user, Pass: s.pass}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: s.user, Pass: s.pass}.AsSha512Mechanism()
		case "GSSAPI":
			kc, err := s.krb.gokrb5()
			if err != nil {
				return err
			}
			defer kc.Destroy()
			m = fkerberos.Auth{Client: kc, Service: s.krb.service, PersistAfterAuth: true}.AsMechanism()
		}
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for _, v := range compatProduceValues() {
		rs = append(rs, kgo.StringRecord(v))
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// gokrb5 logs the principal in with its keytab.
func (k *krbClient) gokrb5() (*client.Client, error) {
	cfg, err := krbconfig.Load(k.kdc.Krb5Conf)
	if err != nil {
		return nil, err
	}
	kt, err := keytab.Load(k.keytab)
	if err != nil {
		return nil, err
	}
	return client.NewWithKeytab(k.principal, kdctest.Realm, kt, cfg, client.DisablePAFXFAST(true)), nil
}

// saramaSecure produces through a secured listener with sarama.
func saramaSecure(ctx context.Context, s secCell, topic string) error {
	cfg := saramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Max = 2
	if s.tls() {
		tc, err := s.tlsConfig()
		if err != nil {
			return err
		}
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	if s.mechanism != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLMechanism(s.mechanism)
		cfg.Net.SASL.User, cfg.Net.SASL.Password = s.user, s.pass
		switch s.mechanism {
		case "SCRAM-SHA-256":
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xscram.SHA256} }
		case "SCRAM-SHA-512":
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xscram.SHA512} }
		case "GSSAPI":
			cfg.Net.SASL.GSSAPI = sarama.GSSAPIConfig{AuthType: sarama.KRB5_KEYTAB_AUTH, KeyTabPath: s.krb.keytab,
				KerberosConfigPath: s.krb.kdc.Krb5Conf, ServiceName: s.krb.service, Username: s.krb.principal,
				Realm: kdctest.Realm, DisablePAFXFAST: true}
		}
	}
	p, err := sarama.NewSyncProducer([]string{s.addr}, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	var ms []*sarama.ProducerMessage
	for _, v := range compatProduceValues() {
		ms = append(ms, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)})
	}
	return p.SendMessages(ms)
}

// xdgSCRAM adapts xdg-go/scram to sarama.SCRAMClient.
type xdgSCRAM struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (c *xdgSCRAM) Begin(user, pass, authz string) error {
	cl, err := c.hash.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}
func (c *xdgSCRAM) Step(challenge string) (string, error) { return c.conv.Step(challenge) }
func (c *xdgSCRAM) Done() bool                            { return c.conv.Done() }

// kcatSecure produces through a secured listener with kcat (librdkafka;
// GSSAPI through Cyrus SASL, which runs kinit with the keytab).
func kcatSecure(kcat string) func(ctx context.Context, s secCell, topic string) error {
	return func(ctx context.Context, s secCell, topic string) error {
		args := []string{"-P", "-b", s.addr, "-t", topic, "-X", "acks=all"}
		proto := "PLAINTEXT"
		switch {
		case s.tls() && s.mechanism != "":
			proto = "SASL_SSL"
		case s.tls():
			proto = "SSL"
		case s.mechanism != "":
			proto = "SASL_PLAINTEXT"
		}
		args = append(args, "-X", "security.protocol="+proto)
		if s.tls() {
			args = append(args, "-X", "ssl.ca.location="+s.ca)
			if s.cert.CertFile != "" {
				args = append(args, "-X", "ssl.certificate.location="+s.cert.CertFile, "-X", "ssl.key.location="+s.cert.KeyFile)
			}
		}
		env := os.Environ()
		switch s.mechanism {
		case "":
		case "GSSAPI":
			args = append(args, "-X", "sasl.mechanisms=GSSAPI", "-X", "sasl.kerberos.service.name="+s.krb.service,
				"-X", "sasl.kerberos.keytab="+s.krb.keytab, "-X", "sasl.kerberos.principal="+s.krb.principal+"@"+kdctest.Realm)
			dir, err := os.MkdirTemp("", "compat-kcat-krb")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			env = append(s.krb.kdc.Env(), "KRB5CCNAME=FILE:"+filepath.Join(dir, "ccache"))
		default:
			args = append(args, "-X", "sasl.mechanisms="+s.mechanism, "-X", "sasl.username="+s.user, "-X", "sasl.password="+s.pass)
		}
		cmd := exec.CommandContext(ctx, kcat, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(strings.Join(compatProduceValues(), "\n") + "\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kcat %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
}

// kcatGSSAPIMissing says why kcat cannot do GSSAPI here, or "".
func kcatGSSAPIMissing() string {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/sasl2/libgssapiv2.so"); err != nil {
		return "Cyrus SASL GSSAPI module not installed (Debian package libsasl2-modules-gssapi-mit)"
	}
	if _, err := exec.LookPath("kinit"); err != nil {
		return "kinit not installed (Debian package krb5-user)"
	}
	return ""
}

// segmentioSecure produces through a secured listener with
// segmentio/kafka-go (which has PLAIN and SCRAM, no GSSAPI).
func segmentioSecure(ctx context.Context, s secCell, topic string) error {
	tr := &segkafka.Transport{}
	if s.tls() {
		tc, err := s.tlsConfig()
		if err != nil {
			return err
		}
		tr.TLS = tc
	}
	var m segsasl.Mechanism
	var err error
	switch s.mechanism {
	case "PLAIN":
		m = segplain.Mechanism{Username: s.user, Password: s.pass}
	case "SCRAM-SHA-256":
		m, err = segscram.Mechanism(segscram.SHA256, s.user, s.pass)
	case "SCRAM-SHA-512":
		m, err = segscram.Mechanism(segscram.SHA512, s.user, s.pass)
	}
	if err != nil {
		return err
	}
	tr.SASL = m
	defer tr.CloseIdleConnections()
	w := &segkafka.Writer{Addr: segkafka.TCP(s.addr), Topic: topic, RequiredAcks: segkafka.RequireAll,
		AllowAutoTopicCreation: true, BatchTimeout: 10 * time.Millisecond, Transport: tr}
	defer w.Close()
	var ms []segkafka.Message
	for _, v := range compatProduceValues() {
		ms = append(ms, segkafka.Message{Value: []byte(v)})
	}
	for try := 0; try < 20; try++ { // the topic is created by the first metadata request
		if err = w.WriteMessages(ctx, ms...); err == nil || !errors.Is(err, segkafka.UnknownTopicOrPartition) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
