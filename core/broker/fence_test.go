package broker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/cluster/clustertest"
	"github.com/vltava/vltava/core/config"
)

// lockedBuffer is a log sink a test can read while a broker writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Fault 4 of issue 9, at the broker: three in-process brokers, each with
// its own raft metadata voter, and broker 3's quorum traffic (both ways)
// through a proxy that starts swallowing bytes. Broker 3 leads a
// partition; once cut off, it must log that it is fenced and refuse
// acks=1 and acks=all writes with NOT_LEADER_OR_FOLLOWER within its
// session timeout + 1s. (Its followers still fetch from it over the
// Kafka port, so without fencing even acks=all writes keep succeeding.)
// Before the fix its keep-alive hung without a deadline and it kept
// acknowledging for as long as the test ran.
func TestBrokerCutOffFromQuorumStopsAcknowledging(t *testing.T) {
	const ttl = 3 * time.Second
	const cut = int32(3)
	stores, network := clustertest.IsolatedRaft(t, cut, testLogger(), 15*time.Second)
	var logs lockedBuffer
	brokers := map[int32]*Broker{}
	for id := int32(1); id <= 3; id++ {
		cfg := config.DefaultBroker()
		cfg.NodeID = id
		cfg.Listeners = "127.0.0.1:0"
		cfg.LogDirs = t.TempDir()
		cfg.DefaultReplicationFactor = 3
		cfg.OffsetsTopicReplicationFactor = 3
		cfg.ReplicaFetchWaitMaxMs = 50
		cfg.BrokerSessionTimeoutMs = ttl.Milliseconds()
		logger := testLogger()
		if id == cut {
			var w io.Writer = &logs
			if testing.Verbose() {
				w = io.MultiWriter(&logs, os.Stderr)
			}
			logger = slog.New(slog.NewTextHandler(w, nil))
		}
		b, err := New(cfg, Options{Logger: logger, Store: stores[id], Cluster: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers[id] = b
	}
	t.Cleanup(network.Heal) // runs before the brokers close
	waitUntilT(t, "every broker sees every broker", func() error {
		for id, b := range brokers {
			if n := len(b.liveBrokers()); n != 3 {
				return fmt.Errorf("broker %d sees %d brokers", id, n)
			}
		}
		return nil
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[1].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 3, 3, nil, "fence"); err != nil {
		t.Fatal(err)
	}
	// The partition broker 3 leads, with its full ISR, as broker 3 sees it.
	cl3, err := kgo.NewClient(kgo.SeedBrokers(brokers[cut].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl3.Close()
	led := int32(-1)
	waitUntilT(t, "broker 3 leads a partition of fence with a full ISR", func() error {
		md, err := kadm.NewClient(cl3).Metadata(testCtx(t), "fence")
		if err != nil {
			return err
		}
		for _, p := range md.Topics["fence"].Partitions {
			if p.Leader == cut && len(p.ISR) == 3 {
				led = p.Partition
				return nil
			}
		}
		return fmt.Errorf("metadata %+v", md.Topics["fence"].Partitions)
	})
	produce := func(acks int16, seq int) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = acks, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "fence"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = led, valueBatch(fmt.Sprintf("v%d", seq))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := cl3.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			return -1 // no answer: not an acknowledgement
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	for _, acks := range []int16{1, -1} {
		if code := produce(acks, 0); code != 0 {
			t.Fatalf("acks=%d before the cut: %v", acks, kerr.ErrorForCode(code))
		}
	}

	cutAt := time.Now()
	network.Cut()
	var lastAck time.Time
	refused := map[int16]int{}
	for seq := 1; time.Since(cutAt) < ttl+3*time.Second; seq++ {
		acks := []int16{1, -1}[seq%2]
		code := produce(acks, seq)
		switch code {
		case 0:
			lastAck = time.Now()
		default:
			refused[code]++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lastAck.IsZero() {
		t.Logf("broker %d acknowledged nothing after the cut", cut)
	} else {
		t.Logf("broker %d's last acknowledgement came %v after the cut", cut, lastAck.Sub(cutAt).Round(time.Millisecond))
	}
	if !lastAck.IsZero() && lastAck.Sub(cutAt) > ttl+time.Second {
		t.Errorf("broker %d still acknowledged writes %v after it was cut off from the quorum; want none after the session timeout (%v) + 1s",
			cut, lastAck.Sub(cutAt), ttl)
	}
	if refused[kerr.NotLeaderForPartition.Code] == 0 {
		t.Errorf("broker %d never answered NOT_LEADER_OR_FOLLOWER after the cut (answers %v)", cut, refused)
	}
	if !strings.Contains(logs.String(), "fenced") {
		t.Errorf("broker %d did not log that it is fenced; its log:\n%s", cut, logs.String())
	}
}

// waitUntilT polls cond every 20ms for up to 30s.
func waitUntilT(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
