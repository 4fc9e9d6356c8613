package broker

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
)

func saslClusterConfig(t *testing.T, id int32, user, pass string) config.Broker {
	cfg := config.DefaultBroker()
	cfg.NodeID = id
	cfg.Listeners = "INTERNAL://127.0.0.1:0"
	cfg.ListenerSecurityProtocolMap = "INTERNAL:SASL_PLAINTEXT"
	cfg.SaslMechanismInterBrokerProtocol = "PLAIN"
	cfg.InterBrokerSaslUsername, cfg.InterBrokerSaslPassword = user, pass
	cfg.LogDirs = t.TempDir()
	cfg.DefaultReplicationFactor = 3
	cfg.OffsetsTopicReplicationFactor = 3
	cfg.ReplicaFetchWaitMaxMs = 50
	cfg.ReplicaLagTimeMaxMs = 2000
	return cfg
}

// Brokers authenticate to each other with SASL on a SASL inter-broker
// listener: three with the right credentials replicate; one with a wrong
// password never does (it leaves the ISR with an empty log) and logs the
// refusal; one with no credentials does not start.
func TestSASLInterBroker(t *testing.T) {
	users := map[string]string{"broker": "broker-secret", "alice": "alice-secret"}
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
	startWith := func(cfg config.Broker, logger *slog.Logger) (*Broker, error) {
		b, err := New(cfg, Options{Logger: logger, Store: s, Cluster: true, Authenticators: []sdk.Authenticator{newPlainAuth(users)}})
		if err != nil {
			return nil, err
		}
		if err := b.Start(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.bs[cfg.NodeID] = b
		c.mu.Unlock()
		return b, nil
	}
	for id := int32(1); id <= 3; id++ {
		if _, err := startWith(saslClusterConfig(t, id, "broker", "broker-secret"), testLogger()); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor("every broker sees every broker", func() bool {
		for _, b := range c.brokers() {
			if len(b.liveBrokers()) != 3 {
				return false
			}
		}
		return true
	})
	var seeds []string
	for _, b := range c.brokers() {
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), plainOpt("alice", "alice-secret"), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createAssigned(ctx, cl, "sasl-repl", [][]int32{{1, 2, 3}})
	produceAcksAll(ctx, t, cl, "sasl-repl", 50)
	c.waitFor("every replica caught up", func() bool {
		for _, b := range c.brokers() {
			if b.topic("sasl-repl").partition(0).log.EndOffset() != 50 {
				return false
			}
		}
		return true
	})

	noCreds := saslClusterConfig(t, 5, "", "")
	noCreds.SaslMechanismInterBrokerProtocol = ""
	if _, err := startWith(noCreds, testLogger()); err == nil || !strings.Contains(err.Error(), "inter.broker.sasl.username") {
		t.Errorf("a broker without inter-broker credentials started: %v", err)
	}

	logs := &syncBuf{}
	b4, err := startWith(saslClusterConfig(t, 4, "broker", "wrong"), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.createAssigned(ctx, cl, "sasl-intruder", [][]int32{{1, 4}})
	cl1, err := kgo.NewClient(kgo.SeedBrokers(seeds...), plainOpt("alice", "alice-secret"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl1.Close()
	for i := range 10 {
		if err := cl1.ProduceSync(ctx, &kgo.Record{Topic: "sasl-intruder", Value: []byte("x" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	c.waitFor("the broker with a wrong password leaves the ISR", func() bool {
		v := c.partitionMeta(1, "sasl-intruder", 0)
		return v != nil && slices.Equal(v.ISR, []int32{1})
	})
	if end := b4.topic("sasl-intruder").partition(0).log.EndOffset(); end != 0 {
		t.Errorf("the broker with a wrong password replicated up to offset %d", end)
	}
	if l := logs.String(); !strings.Contains(l, "replica: fetch failed") || !strings.Contains(l, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("the broker's log does not say why it cannot replicate:\n%s", l)
	}
}

// With connections.max.reauth.ms the brokers' fetch connections outlive
// no session: the replica fetchers reconnect (and authenticate again)
// before their session expires, so replication goes on past several
// lifetimes without a refused fetch and without leaving the ISR.
func TestSASLInterBrokerReauthentication(t *testing.T) {
	users := map[string]string{"broker": "broker-secret", "alice": "alice-secret"}
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
	logs := &syncBuf{}
	for id := int32(1); id <= 3; id++ {
		cfg := saslClusterConfig(t, id, "broker", "broker-secret")
		cfg.ConnectionsMaxReauthMs = 1500
		b, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Store: s, Cluster: true,
			Authenticators: []sdk.Authenticator{newPlainAuth(users)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.bs[id] = b
		c.mu.Unlock()
	}
	c.waitFor("every broker sees every broker", func() bool {
		for _, b := range c.brokers() {
			if len(b.liveBrokers()) != 3 {
				return false
			}
		}
		return true
	})
	var seeds []string
	for _, b := range c.brokers() {
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), plainOpt("alice", "alice-secret"), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createAssigned(ctx, cl, "sasl-reauth", [][]int32{{1, 2, 3}})
	for round := 1; round <= 3; round++ {
		produceAcksAll(ctx, t, cl, "sasl-reauth", 20)
		c.waitFor("every replica caught up", func() bool {
			for _, b := range c.brokers() {
				if b.topic("sasl-reauth").partition(0).log.EndOffset() != int64(20*round) {
					return false
				}
			}
			return true
		})
		time.Sleep(2 * time.Second) // past a session lifetime
	}
	if v := c.partitionMeta(1, "sasl-reauth", 0); v == nil || len(v.ISR) != 3 {
		t.Errorf("ISR after three session lifetimes: %+v, want all three replicas", v)
	}
	if l := logs.String(); strings.Contains(l, "replica: fetch failed") {
		t.Errorf("a fetch was refused across re-authentication:\n%s", l)
	}
}
