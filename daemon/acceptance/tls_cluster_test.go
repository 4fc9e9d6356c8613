package acceptance

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/daemon/daemontest"
)

// writeYAML writes cfg as a broker config file.
func writeYAML(t *testing.T, cfg map[string]string) string {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		fmt.Fprintf(&b, "%s: %q\n", k, cfg[k])
	}
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsClusterConfig secures everything with certificates from ca: the one
// listener (the bare --listen address, named PLAINTEXT) is mapped to SSL
// with client certificates required, so clients and the brokers' replica
// fetchers present one; the raft quorum port is mutual TLS too.
func tlsClusterConfig(ca *tlstest.CA, cert tlstest.Cert) map[string]string {
	cfg := maps.Clone(clusterDefaults)
	maps.Copy(cfg, map[string]string{
		"listener.security.protocol.map":      "PLAINTEXT:SSL",
		"ssl.keystore.location":               cert.Keystore,
		"ssl.truststore.location":             ca.CertFile,
		"ssl.client.auth":                     "required",
		"controller.quorum.security.protocol": "SSL",
	})
	return cfg
}

// A three-broker cluster secured by TLS (clients, replication and the
// metadata quorum) keeps acknowledged acks=all writes when its leader is
// killed with kill -9; a fourth process whose certificate comes from
// another CA cannot join the quorum, never serves, and the voters log why.
func TestTLSClusterAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster tests start several daemons; skipped with -short")
	}
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "another CA")
	brokerCert := ca.Issue(pkix.Name{CommonName: "broker"})
	alice := ca.Issue(pkix.Name{CommonName: "alice"})
	bin := daemontest.Build(t)
	c := daemontest.StartClusterWith(t, bin, daemontest.ClusterOptions{Brokers: 3},
		"--config", writeYAML(t, tlsClusterConfig(ca, brokerCert)), "--log-level", "debug")
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.Brokers() {
				t.Logf("broker %d log tail:\n%s", p.NodeID(), tail(p.Log(), 80))
			}
		}
	})
	clientTLS, err := tlsconf.Files{KeystoreLocation: alice.Keystore, TruststoreLocation: ca.CertFile, VerifyHostname: true}.Client()
	if err != nil {
		t.Fatal(err)
	}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DialTLSConfig(clientTLS),
			kgo.RetryTimeout(30 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	seen := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		m, err := kadm.NewClient(client()).BrokerMetadata(ctx)
		if err != nil {
			return -1
		}
		return len(m.Brokers)
	}
	waitUntil(t, 60*time.Second, "3 live brokers over TLS", func() error {
		if n := seen(); n != 3 {
			return fmt.Errorf("%d brokers", n)
		}
		return nil
	})

	// A plaintext client gets nothing.
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
	if err := plain.Ping(pctx); err == nil {
		t.Error("a plaintext client reached a broker whose only listener is SSL")
	}
	pcancel()
	plain.Close()

	ctx := testCtx(t, 3*time.Minute)
	adm := kadm.NewClient(client())
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "tls-acks"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	prod := client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("tls-acks"))
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	var leader int32 = -1
	waitUntil(t, 30*time.Second, "the partition's leader", func() error {
		md, err := adm.Metadata(ctx, "tls-acks")
		if err != nil {
			return err
		}
		leader = md.Topics["tls-acks"].Partitions[0].Leader
		if leader < 1 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	c.Broker(leader).Kill9()
	rd := client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tls-acks": {0: kgo.NewOffset().AtStart()}}))
	got := 0
	for got < n {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d acknowledged records after killing leader %d: %v", got, n, leader, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := "v" + strconv.Itoa(got); string(r.Value) != want {
				t.Fatalf("record %d = %q, want %q", got, r.Value, want)
			}
			got++
		})
	}

	// The intruder: a broker (a non-voter of the quorum) whose
	// certificate comes from another CA.
	intruderCfg := tlsClusterConfig(ca, other.Issue(pkix.Name{CommonName: "broker"}))
	addr, quorum := daemontest.FreePort(t), daemontest.FreePort(t)
	logPath := filepath.Join(t.TempDir(), "intruder.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", writeYAML(t, intruderCfg), "--listen", addr, "--node-id", "4",
		"--data-dir", t.TempDir(), "--quorum-listen", quorum, "--quorum-voters", c.Voters(),
		"--process-roles", "broker", "--metrics-listen=", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its plugin processes go with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	waitUntil(t, 30*time.Second, "a voter logs the refused intruder", func() error {
		for _, p := range c.Brokers() {
			if p.Running() && strings.Contains(p.Log(), "refusing quorum connection: TLS handshake failed") {
				return nil
			}
		}
		return fmt.Errorf("no refusal logged yet")
	})
	time.Sleep(3 * time.Second) // time it would have had to join
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Error("the intruder serves Kafka")
	}
	if n := seen(); n != 2 {
		t.Errorf("the cluster lists %d brokers, want the 2 live members", n)
	}
	// It says why: its requests to join the quorum fail on TLS.
	waitUntil(t, 60*time.Second, "the intruder says it cannot join the quorum", func() error {
		l, _ := os.ReadFile(logPath)
		for _, line := range strings.Split(string(l), "\n") {
			if strings.Contains(line, "non-voter not added yet") && strings.Contains(line, "tls") {
				return nil
			}
		}
		return fmt.Errorf("log:\n%s", tail(string(l), 20))
	})
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Error("the intruder serves Kafka")
	}
}

// TestTLSClusterTransactions: on a cluster whose only listener is mutual
// TLS, a transaction over partitions led by every broker commits and
// another aborts, read_committed sees exactly the committed records: the
// coordinator's broker-to-broker clients (WriteTxnMarkers to the other
// leaders, the leaders' AddPartitionsToTxn verification with the
// coordinator) use the inter-broker listener's TLS, as replication does.
func TestTLSClusterTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster tests start several daemons; skipped with -short")
	}
	ca := tlstest.NewCA(t, "cluster CA")
	brokerCert := ca.Issue(pkix.Name{CommonName: "broker"})
	alice := ca.Issue(pkix.Name{CommonName: "alice"})
	cfg := tlsClusterConfig(ca, brokerCert)
	cfg["transaction.state.log.num.partitions"] = "3"
	c := daemontest.StartClusterWith(t, daemontest.Build(t), daemontest.ClusterOptions{Brokers: 3},
		"--config", writeYAML(t, cfg), "--log-level", "debug")
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.Brokers() {
				t.Logf("broker %d log tail:\n%s", p.NodeID(), tail(p.Log(), 60))
			}
		}
	})
	clientTLS, err := tlsconf.Files{KeystoreLocation: alice.Keystore, TruststoreLocation: ca.CertFile, VerifyHostname: true}.Client()
	if err != nil {
		t.Fatal(err)
	}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DialTLSConfig(clientTLS),
			kgo.RetryTimeout(30 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := testCtx(t, 3*time.Minute)
	adm := kadm.NewClient(client())
	waitUntil(t, 60*time.Second, "the topic, a leader for each partition on 3 brokers", func() error {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, "tls-txn"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		md, err := adm.Metadata(ctx, "tls-txn")
		if err != nil {
			return err
		}
		leaders := map[int32]bool{}
		for _, p := range md.Topics["tls-txn"].Partitions {
			if p.Leader < 1 {
				return fmt.Errorf("partition %d has no leader", p.Partition)
			}
			leaders[p.Leader] = true
		}
		if len(leaders) != 3 {
			return fmt.Errorf("leaders %v", leaders)
		}
		return nil
	})
	p := client(kgo.TransactionalID("tls-txn-1"), kgo.DefaultProduceTopic("tls-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second))
	txn := func(commit bool, prefix string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := range int32(3) {
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(fmt.Sprintf("%s-%d", prefix, part))}).FirstErr(); err != nil {
				t.Fatalf("produce %s to partition %d: %v", prefix, part, err)
			}
		}
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := p.EndTransaction(ectx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %s (commit %v): %v", prefix, commit, err)
		}
	}
	txn(true, "c1")
	txn(false, "a1")
	txn(true, "c2")
	rd := client(kgo.ConsumeTopics("tls-txn"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[string]bool{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(got) < 6 && rctx.Err() == nil {
		rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for _, want := range []string{"c1-0", "c1-1", "c1-2", "c2-0", "c2-1", "c2-2"} {
		if !got[want] {
			t.Errorf("read_committed misses %s (read %v)", want, got)
		}
	}
	for v := range got {
		if strings.HasPrefix(v, "a1") {
			t.Errorf("read_committed read %s of the aborted transaction", v)
		}
	}
}
