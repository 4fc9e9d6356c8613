package broker

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/tlsconf/tlstest"
	"github.com/vltava/vltava/plugins/metastore/local"
)

// syncBuf is a log sink safe across goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tlsClusterConfig(t *testing.T, id int32, certs *tlsCerts, cert tlstest.Cert) config.Broker {
	cfg := config.DefaultBroker()
	cfg.NodeID = id
	cfg.Listeners = "INTERNAL://127.0.0.1:0"
	cfg.ListenerSecurityProtocolMap = "INTERNAL:SSL"
	cfg.InterBrokerListenerName = "INTERNAL"
	cfg.SslKeystoreLocation = cert.Keystore
	cfg.SslTruststoreLocation = certs.ca.CertFile
	cfg.SslClientAuth = config.ClientAuthRequired
	cfg.LogDirs = t.TempDir()
	cfg.DefaultReplicationFactor = 3
	cfg.OffsetsTopicReplicationFactor = 3
	cfg.ReplicaFetchWaitMaxMs = 50
	cfg.ReplicaLagTimeMaxMs = 2000
	cfg.ControlledShutdownEnable = false // the leader goes as if killed
	return cfg
}

// A three-broker cluster whose only listener is SSL with client
// certificates required replicates over it: acks=all writes survive the
// loss of the leader. A fourth broker whose certificate comes from
// another CA never replicates (it leaves the ISR with an empty log) and
// logs why.
func TestTLSInterBrokerReplication(t *testing.T) {
	certs := newTLSCerts(t)
	s, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c := &inProcCluster{t: t, store: s, cfgs: map[int32]config.Broker{}, bs: map[int32]*Broker{}}
	t.Cleanup(func() {
		for _, b := range c.brokers() {
			b.Close()
		}
		s.Close()
	})
	for id := int32(1); id <= 3; id++ {
		c.cfgs[id] = tlsClusterConfig(t, id, certs, certs.ca.Issue(pkix.Name{CommonName: "broker-" + strconv.Itoa(int(id))}))
		c.start(id)
	}
	c.waitFor("every broker sees every broker", func() bool {
		for _, b := range c.brokers() {
			if len(b.liveBrokers()) != 3 {
				return false
			}
		}
		return true
	})
	client := func(opts ...kgo.Opt) *kgo.Client {
		var seeds []string
		for _, b := range c.brokers() {
			seeds = append(seeds, b.Addr())
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(20 * time.Second),
			kgo.DialTLSConfig(certs.clientTLS(t, &certs.alice))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const n = 200
	cl := client(kgo.RequiredAcks(kgo.AllISRAcks()))
	c.createAssigned(ctx, cl, "tls-repl", [][]int32{{1, 2, 3}})
	produceAcksAll(ctx, t, cl, "tls-repl", n)
	c.waitFor("every replica caught up, in the ISR", func() bool {
		v := c.partitionMeta(1, "tls-repl", 0)
		if v == nil || len(v.ISR) != 3 {
			return false
		}
		for _, b := range c.brokers() {
			if b.topic("tls-repl").partition(0).log.EndOffset() != n {
				return false
			}
		}
		return true
	})
	leader := c.partitionMeta(1, "tls-repl", 0).Leader
	c.stop(leader)
	c.waitFor("a new leader", func() bool {
		for _, b := range c.brokers() {
			v := c.partitionMeta(b.cfg.NodeID, "tls-repl", 0)
			if v == nil || v.Leader < 0 || v.Leader == leader {
				return false
			}
		}
		return true
	})
	rd := client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tls-repl": {0: kgo.NewOffset().AtStart()}}))
	got := 0
	for got < n {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d acknowledged records after the leader's loss: %v", got, n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := "v" + strconv.Itoa(got); string(r.Value) != want {
				t.Fatalf("record %d = %q, want %q", got, r.Value, want)
			}
			got++
		})
	}

	// A broker with a certificate from another CA: it registers through
	// the shared store (the raft quorum's mutual TLS is what keeps it
	// out of a real cluster's metadata), but no broker accepts its
	// fetches, and it accepts none of theirs.
	logs := &syncBuf{}
	cfg4 := tlsClusterConfig(t, 4, certs, certs.other.Issue(pkix.Name{CommonName: "intruder"}))
	b4, err := New(cfg4, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Store: s, Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b4.Start(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.bs[4] = b4
	c.mu.Unlock()
	var live []int32
	for _, b := range c.brokers() {
		if b.cfg.NodeID != 4 {
			live = append(live, b.cfg.NodeID)
		}
	}
	slices.Sort(live)
	c.createAssigned(ctx, cl, "tls-intruder", [][]int32{{live[0], 4}})
	cl1 := client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	for i := range 10 {
		if err := cl1.ProduceSync(ctx, &kgo.Record{Topic: "tls-intruder", Value: []byte("x" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	c.waitFor("the intruder leaves the ISR", func() bool {
		v := c.partitionMeta(live[0], "tls-intruder", 0)
		return v != nil && slices.Equal(v.ISR, []int32{live[0]})
	})
	if end := b4.topic("tls-intruder").partition(0).log.EndOffset(); end != 0 {
		t.Errorf("the intruder replicated up to offset %d", end)
	}
	if l := logs.String(); !strings.Contains(l, "replica: fetch failed") || !strings.Contains(l, "certificate") {
		t.Errorf("the intruder's log does not say why it cannot replicate:\n%s", l)
	}
}

// Every broker registers every listener; Metadata and FindCoordinator
// answer with the addresses of the listener the client is connected to.
func TestListenerEndpointsInCluster(t *testing.T) {
	certs := newTLSCerts(t)
	s, err := local.Open(filepath.Join(t.TempDir(), "meta.db"), local.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c := &inProcCluster{t: t, store: s, cfgs: map[int32]config.Broker{}, bs: map[int32]*Broker{}}
	t.Cleanup(func() {
		for _, b := range c.brokers() {
			b.Close()
		}
		s.Close()
	})
	for id := int32(1); id <= 2; id++ {
		cfg := config.DefaultBroker()
		cfg.NodeID = id
		cfg.Listeners = "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"
		cfg.ListenerSecurityProtocolMap = "INTERNAL:PLAINTEXT,EXTERNAL:SSL"
		cfg.InterBrokerListenerName = "INTERNAL"
		cfg.SslKeystoreLocation = certs.broker.Keystore
		cfg.LogDirs = t.TempDir()
		cfg.OffsetsTopicReplicationFactor = 2
		c.cfgs[id] = cfg
		c.start(id)
	}
	c.waitFor("both brokers see both", func() bool {
		for _, b := range c.brokers() {
			if len(b.liveBrokers()) != 2 {
				return false
			}
		}
		return true
	})
	for _, tc := range []struct {
		listener string
		opts     []kgo.Opt
	}{
		{"INTERNAL", nil},
		{"EXTERNAL", []kgo.Opt{kgo.DialTLSConfig(certs.clientTLS(t, nil))}},
	} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.broker(1).ListenerAddr(tc.listener))}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: %v", tc.listener, err)
		}
		got := map[int32]string{}
		for _, br := range resp.Brokers {
			got[br.NodeID] = hostPort(br.Host, br.Port)
		}
		for id := int32(1); id <= 2; id++ {
			if want := c.broker(id).ListenerAddr(tc.listener); got[id] != want {
				t.Errorf("metadata on %s: broker %d at %q, want %q", tc.listener, id, got[id], want)
			}
		}
		// The group coordinator is named at its address on this listener.
		c.waitFor("a coordinator on "+tc.listener, func() bool {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey = "g-" + tc.listener
			fc, err := req.RequestWith(ctx, cl)
			if err != nil || fc.ErrorCode != 0 {
				return false
			}
			if want := c.broker(fc.NodeID).ListenerAddr(tc.listener); hostPort(fc.Host, fc.Port) != want {
				t.Fatalf("%s: coordinator %d at %s:%d, want %s", tc.listener, fc.NodeID, fc.Host, fc.Port, want)
			}
			return true
		})
	}
}
