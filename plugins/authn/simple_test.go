package authn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/vltava/vltava/daemon/daemontest"
	scramcred "github.com/vltava/vltava/plugins/authn/scram"
	"github.com/vltava/vltava/plugins/host"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/plugintest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Users seeded by seedUsers.
const (
	alicePass = "alice-secret"
	bobPass   = "bob-secret"
)

// seedUsers runs a PLAINTEXT broker on dataDir, creates alice (both SCRAM
// mechanisms) and bob (SCRAM-SHA-256 only) with kadm, checks the admin
// APIs' answers, and stops it. (A single listener per broker for now: a
// SASL-only broker's first user is created this way.)
func seedUsers(t *testing.T, bin, dataDir string) {
	t.Helper()
	p := daemontest.Start(t, bin, "--data-dir", dataDir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := ctxT(t, 30*time.Second)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: alicePass},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: alicePass},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: bobPass},
	})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || desc.Error() != nil {
		t.Fatalf("DescribeUserSCRAMs: %v %v", err, desc.Error())
	}
	got := fmt.Sprint(desc["alice"].CredInfos, desc["bob"].CredInfos, len(desc))
	if want := "[SCRAM-SHA-256=iterations=4096 SCRAM-SHA-512=iterations=8192] [SCRAM-SHA-256=iterations=4096] 2"; got != want {
		t.Errorf("described %s, want %s", got, want)
	}
	// Kafka's refusals (a raw request: kadm refuses bad iterations itself).
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "carol", Mechanism: 2}}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "dave", Mechanism: 1, Iterations: 100, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)},
		{Name: "erin", Mechanism: 3, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)},
		{Name: "frank", Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)},
		{Name: "frank", Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)},
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, r := range resp.Results {
		codes[r.User] = r.ErrorCode
	}
	for user, want := range map[string]*kerr.Error{"carol": kerr.ResourceNotFound, "dave": kerr.UnacceptableCredential,
		"erin": kerr.UnsupportedSaslMechanism, "frank": kerr.DuplicateResource} {
		if codes[user] != want.Code {
			t.Errorf("alter %s: error code %d, want %s", user, codes[user], want.Message)
		}
	}
	if d, _ := adm.DescribeUserSCRAMs(ctx, "carol"); !errors.Is(d["carol"].Err, kerr.ResourceNotFound) {
		t.Errorf("describing an unknown user: %v, want RESOURCE_NOT_FOUND", d["carol"].Err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	// Nothing secret in the broker's log.
	for _, s := range []string{alicePass, bobPass} {
		if strings.Contains(p.Log(), s) {
			t.Errorf("the broker log contains a password")
		}
	}
}

// saslBroker is a vltavad with one SASL_PLAINTEXT listener.
type saslBroker struct {
	addr string
	cmd  *exec.Cmd
	out  *syncBuffer
}

// startSASL runs bin with a SASL_PLAINTEXT listener, the authenticators
// and extra config lines.
func startSASL(t *testing.T, bin, dataDir, authenticators, extra string) *saslBroker {
	t.Helper()
	addr := daemontest.FreePort(t)
	cfg := fmt.Sprintf("listeners: SASL_PLAINTEXT://%s\nlog.dirs: %s\nsasl.authenticators: %s\n%s", addr, dataDir, authenticators, extra)
	if !strings.Contains(extra, "metrics.listen") {
		cfg += "\nmetrics.listen: \"\"\n"
	}
	path := filepath.Join(t.TempDir(), "vltava.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &saslBroker{addr: addr, out: &syncBuffer{}}
	b.cmd = exec.Command(bin, "--config", path)
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { b.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("vltavad output:\n%s", b.out)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return b
		}
		select {
		case <-exited:
			t.Fatalf("vltavad exited before serving:\n%s", b.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("vltavad did not accept connections on %s", addr)
		}
	}
}

// pluginPid finds the broker's child serving `plugin authenticator name`.
func (b *saslBroker) pluginPid(t *testing.T, name string) int {
	t.Helper()
	return pluginPid(t, b.cmd.Process.Pid, name)
}

// pluginPid finds parent's child serving `plugin authenticator name`.
func pluginPid(t *testing.T, parent int, name string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(parent) &&
			strings.Contains(string(cmdline), "plugin\x00authenticator\x00"+name) {
			return pid
		}
	}
	t.Fatalf("no %s authenticator process under vltavad %d", name, parent)
	return 0
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// franzRoundTrip produces one record to topic and reads it back.
func franzRoundTrip(t *testing.T, addr string, m sasl.Mechanism, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.RetryTimeout(5*time.Second), kgo.RequestRetries(2))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := ctxT(t, 20*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	if fs.NumRecords() == 0 {
		return errors.New("consume: no record")
	}
	return nil
}

// franzRefused reports whether a login with m fails with
// SASL_AUTHENTICATION_FAILED.
func franzRefused(t *testing.T, addr string, m sasl.Mechanism) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	err = cl.Ping(ctxT(t, 10*time.Second))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		return fmt.Errorf("login got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	return nil
}

func TestSimpleAuthenticator(t *testing.T) {
	bin := daemontest.Build(t)
	dataDir := t.TempDir()
	seedUsers(t, bin, dataDir)
	b := startSASL(t, bin, dataDir, "simple", "")

	t.Run("franz-go", func(t *testing.T) {
		for name, m := range map[string]sasl.Mechanism{
			"PLAIN":         plain.Auth{User: "alice", Pass: alicePass}.AsMechanism(),
			"SCRAM-SHA-256": scram.Auth{User: "alice", Pass: alicePass}.AsSha256Mechanism(),
			"SCRAM-SHA-512": scram.Auth{User: "alice", Pass: alicePass}.AsSha512Mechanism(),
			"PLAIN-bob":     plain.Auth{User: "bob", Pass: bobPass}.AsMechanism(), // checked against SHA-256
		} {
			if err := franzRoundTrip(t, b.addr, m, "franz-"+name); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		for name, m := range map[string]sasl.Mechanism{
			"PLAIN-wrong":       plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
			"PLAIN-unknown":     plain.Auth{User: "mallory", Pass: alicePass}.AsMechanism(),
			"SCRAM-256-wrong":   scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(),
			"SCRAM-512-wrong":   scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(),
			"SCRAM-512-unknown": scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
			"SCRAM-512-no-cred": scram.Auth{User: "bob", Pass: bobPass}.AsSha512Mechanism(),
			"PLAIN-other-authz": plain.Auth{Zid: "alice", User: "bob", Pass: bobPass}.AsMechanism(),
		} {
			if err := franzRefused(t, b.addr, m); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("unauthenticated", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := kadm.NewClient(cl).ListTopics(ctxT(t, 10*time.Second)); err == nil {
			t.Fatal("Metadata without authentication was served")
		}
	})

	t.Run("sarama", func(t *testing.T) {
		// Handshake v0 (KIP-43's raw tokens, sarama's SASLHandshakeV0)
		// and v1 (SaslAuthenticate).
		for _, hv := range []int16{sarama.SASLHandshakeV1, sarama.SASLHandshakeV0} {
			for _, c := range []struct {
				mech       sarama.SASLMechanism
				user, pass string
				ok         bool
			}{
				{sarama.SASLTypePlaintext, "alice", alicePass, true},
				{sarama.SASLTypeSCRAMSHA512, "alice", alicePass, true},
				{sarama.SASLTypeSCRAMSHA256, "bob", bobPass, true},
				{sarama.SASLTypePlaintext, "alice", "nope", false},
				{sarama.SASLTypeSCRAMSHA512, "alice", "nope", false},
			} {
				err := saramaRoundTrip(b.addr, c.mech, hv, c.user, c.pass)
				if c.ok && err != nil {
					t.Errorf("%s (handshake v%d) %s: %v", c.mech, hv, c.user, err)
				}
				// v0 has no error code: the connection just closes.
				if !c.ok && (err == nil || (hv == sarama.SASLHandshakeV1 && !strings.Contains(err.Error(), "SASL"))) {
					t.Errorf("%s (handshake v%d) %s with a wrong password: %v, want a SASL authentication error", c.mech, hv, c.user, err)
				}
			}
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat, err := exec.LookPath("kcat")
		if err != nil {
			t.Skip("kcat not installed (Debian package kcat)")
		}
		for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
			topic := "kcat-" + mech
			if out, err := runKcat(t, kcat, b.addr, mech, "alice", alicePass, "hello\n", "-P", "-t", topic); err != nil {
				t.Errorf("kcat %s produce: %v\n%s", mech, err, out)
				continue
			}
			out, err := runKcat(t, kcat, b.addr, mech, "alice", alicePass, "", "-C", "-t", topic, "-o", "beginning", "-c", "1", "-e")
			if err != nil || !strings.Contains(out, "hello") {
				t.Errorf("kcat %s consume: %v\n%s", mech, err, out)
			}
			if out, err := runKcat(t, kcat, b.addr, mech, "alice", "nope", "", "-L", "-m", "2"); err == nil {
				t.Errorf("kcat %s with a wrong password listed metadata:\n%s", mech, out)
			} else if !strings.Contains(out, "uthentication") {
				t.Errorf("kcat %s with a wrong password: %v, output lacks an authentication error:\n%s", mech, err, out)
			}
		}
	})

	t.Run("vltava-user", func(t *testing.T) {
		// `vltava user` over the SASL listener, authenticated as alice.
		cli := filepath.Join(t.TempDir(), "vltava")
		if out, err := exec.Command("go", "build", "-o", cli, "github.com/vltava/vltava/tools/vltava").CombinedOutput(); err != nil {
			t.Fatalf("go build tools/vltava: %v\n%s", err, out)
		}
		run := func(stdin string, args ...string) (string, error) {
			cmd := exec.CommandContext(ctxT(t, 30*time.Second), cli, append([]string{"-b", b.addr}, args...)...)
			cmd.Env = append(os.Environ(), "VLTAVA_SASL_PASSWORD="+alicePass)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		as := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "alice"}
		if out, err := run("carol-pw\n", append([]string{"user", "add", "carol"}, as...)...); err != nil {
			t.Fatalf("user add: %v\n%s", err, out)
		}
		carol := scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism()
		if err := franzRoundTrip(t, b.addr, carol, "carol"); err != nil {
			t.Fatalf("carol after user add: %v", err)
		}
		if out, err := run("", append([]string{"user", "list"}, as...)...); err != nil || !strings.Contains(out, "carol") || strings.Contains(out, "carol-pw") {
			t.Fatalf("user list: %v\n%s", err, out)
		}
		if out, err := run("", append([]string{"user", "remove", "carol"}, as...)...); err != nil {
			t.Fatalf("user remove: %v\n%s", err, out)
		}
		if err := franzRefused(t, b.addr, carol); err != nil {
			t.Errorf("carol after user remove: %v", err)
		}
		if out, err := run("", "user", "list"); err == nil {
			t.Errorf("user list without authentication succeeded:\n%s", out)
		}
	})

	t.Run("plugin-crash", func(t *testing.T) {
		pid := b.pluginPid(t, "simple")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// While it is down or restarting a wrong password is never
		// admitted, and a right one is never told it is wrong.
		for range 5 {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequestRetries(0),
				kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()))
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Ping(ctxT(t, 10*time.Second)); err == nil {
				t.Fatal("a wrong password was admitted while the plugin restarted")
			}
			cl.Close()
		}
		m := scram.Auth{User: "alice", Pass: alicePass}.AsSha512Mechanism()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := franzRoundTrip(t, b.addr, m, "after-crash")
			if err == nil {
				break
			}
			if errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("a login during the plugin restart was refused as bad credentials: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no login succeeded after the plugin was killed: %v", err)
			}
		}
		if err := franzRefused(t, b.addr, scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism()); err != nil {
			t.Errorf("after the restart: %v", err)
		}
		if b.pluginPid(t, "simple") == pid {
			t.Error("the killed plugin process is still the one serving")
		}
	})
}

func runKcat(t *testing.T, kcat, addr, mech, user, pass, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", addr,
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func saramaRoundTrip(addr string, mech sarama.SASLMechanism, handshake int16, user, pass string) error {
	cfg := sarama.NewConfig()
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = mech
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.Version = handshake
	cfg.ApiVersionsRequest = handshake != sarama.SASLHandshakeV0 // sarama's rule: a v0 client predates ApiVersions
	switch mech {
	case sarama.SASLTypeSCRAMSHA512:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgClient{hash: xscram.SHA512} }
	case sarama.SASLTypeSCRAMSHA256:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgClient{hash: xscram.SHA256} }
	}
	cfg.Version = sarama.V3_0_0_0
	cfg.Producer.Return.Successes = true
	cfg.Metadata.Retry.Max = 0
	cfg.Producer.Retry.Max = 0
	cl, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "sarama-" + string(mech), Value: sarama.StringEncoder("v")})
	return err
}

// xdgClient adapts xdg-go/scram to sarama.SCRAMClient.
type xdgClient struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (c *xdgClient) Begin(user, pass, authz string) error {
	cl, err := c.hash.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}
func (c *xdgClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }
func (c *xdgClient) Done() bool                            { return c.conv.Done() }

// TestSimpleContractOutOfProcess runs the Authenticator contract against
// the built-in served by `vltavad plugin authenticator simple`, reading
// credentials from a store lent through the plugin host.
func TestSimpleContractOutOfProcess(t *testing.T) {
	st, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _ := scramcred.New(scramcred.SHA512, "pw", scramcred.MinIterations)
	if _, err := st.Put(t.Context(), &sdk.PutRequest{Key: scramcred.Key("alice", scramcred.SHA512), Value: c.Encode(), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatal(err)
	}
	h := host.New(host.Options{Logger: slog.New(slog.DiscardHandler)})
	defer h.Close()
	p, err := h.Load(t.Context(), host.Spec{Kind: "authenticator", Name: "simple", Path: daemontest.Build(t),
		Args: []string{"plugin", "authenticator", "simple"}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	alice := sdk.Principal{Type: sdk.PrincipalTypeUser, Name: "alice"}
	client := func(pass string) func() func([]byte) []byte {
		return func() func([]byte) []byte {
			cl, _ := xscram.SHA512.NewClient("alice", pass, "")
			conv := cl.NewConversation()
			return func(server []byte) []byte {
				out, err := conv.Step(string(server))
				if err != nil {
					return []byte("client-error")
				}
				return []byte(out)
			}
		}
	}
	plugintest.Authenticator(t, p.Authenticator(), []plugintest.AuthCase{
		{Name: "plain", Mechanism: "PLAIN", Tokens: [][]byte{[]byte("\x00alice\x00pw")}, Principal: alice},
		{Name: "plain-wrong", Mechanism: "PLAIN", Tokens: [][]byte{[]byte("\x00alice\x00nope")}, Reject: true},
		{Name: "scram-512", Mechanism: "SCRAM-SHA-512", NewClient: client("pw"), Steps: 2, Principal: alice},
		{Name: "scram-512-wrong", Mechanism: "SCRAM-SHA-512", NewClient: client("nope"), Steps: 2, Reject: true},
	})
}
