package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/conformance/checker"
	"github.com/vltava/vltava/daemon/daemontest"
	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/metastore/zookeeper/zktest"
)

// The metadata stores the cluster tests run against: the brokers' own
// raft quorum, and an external ZooKeeper or etcd that the test starts
// (Debian packages zookeeper and etcd-server; the subtest skips, naming
// the package, when the server is missing).
var metadataStores = []string{"raft", "zookeeper", "etcd"}

// storeMatrix reports whether every store-parameterised test runs on
// every store (VLTAVA_STORE_MATRIX=1); by default only the
// representative failover test (TestReplicationLeaderKill9) does, and
// the others run on raft.
func storeMatrix() bool { return os.Getenv("VLTAVA_STORE_MATRIX") != "" }

// forEachStore runs fn once per store as subtests named after it: every
// store for representative tests, else raft unless VLTAVA_STORE_MATRIX
// is set.
func forEachStore(t *testing.T, representative bool, fn func(t *testing.T, store string)) {
	stores := metadataStores
	if !representative && !storeMatrix() {
		stores = stores[:1]
	}
	for _, store := range stores {
		t.Run(store, func(t *testing.T) { fn(t, store) })
	}
}

// startStoreCluster is startCluster on the named metadata store: raft
// runs the quorum among the brokers (--quorum-voters); zookeeper and etcd
// start a one-node server and point every broker at it, no quorum flags.
func startStoreCluster(t *testing.T, store string, n int, extra map[string]string) *daemontest.Cluster {
	t.Helper()
	c, _ := startStoreEnsemble(t, store, n, 1, extra)
	return c
}

// storeServers is the external store of a cluster test: its members can
// be killed (kill -9) and the leader found.
type storeServers interface {
	Leader() int
	Kill(i int)
}

// startStoreEnsemble is startStoreCluster with a store of members servers
// (zookeeper, etcd), returned so the test can kill them.
func startStoreEnsemble(t *testing.T, store string, n, members int, extra map[string]string) (*daemontest.Cluster, storeServers) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests start several daemons; skipped with -short")
	}
	cfg := maps.Clone(extra)
	if cfg == nil {
		cfg = map[string]string{}
	}
	var servers storeServers
	switch store {
	case "raft":
		return startCluster(t, n, cfg), nil
	case "zookeeper":
		e := zktest.Start(t, members)
		cfg["metadata.store"] = "zookeeper"
		cfg["zookeeper.connect"] = e.Connect() + "/vltava"
		servers = e
	case "etcd":
		e := etcdtest.Start(t, members)
		cfg["metadata.store"] = "etcd"
		cfg["metadata.store.config.endpoints"] = e.Endpoints()
		cfg["metadata.store.config.prefix"] = "/vltava"
		servers = e
	default:
		t.Fatalf("unknown metadata store %q (want one of %v)", store, metadataStores)
	}
	return startClusterWith(t, daemontest.ClusterOptions{Brokers: n, ExternalStore: true}, cfg), servers
}

// TestStoreMemberKill9: with the metadata in a three-server ZooKeeper
// ensemble or etcd cluster, kill -9 the store's leader; the cluster keeps
// electing partition leaders (a broker is killed too) and accepting
// metadata changes (a topic is created), and no acknowledged write is
// lost.
func TestStoreMemberKill9(t *testing.T) {
	for _, store := range metadataStores[1:] {
		t.Run(store, func(t *testing.T) {
			c, servers := startStoreEnsemble(t, store, 3, 3, nil)
			const topic = "member-kill"
			createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
			log := &ackLog{acked: map[string]int64{}}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			done := make(chan struct{})
			go func() { defer close(done); produceLoop(ctx, t, c, topic, log) }()
			time.Sleep(500 * time.Millisecond)
			var victim int
			waitUntil(t, 30*time.Second, "a store leader", func() error {
				if victim = servers.Leader(); victim < 0 {
					return errors.New("no leader")
				}
				return nil
			})
			t.Logf("SIGKILL %s server %d (the leader)", store, victim)
			servers.Kill(victim)
			leader := waitLeader(t, c, topic, 0, 0)
			t.Logf("SIGKILL partition leader broker %d", leader)
			c.Broker(leader).Kill9()
			waitLeader(t, c, topic, 0, leader)
			createReplicated(t, c, "created-after", 2, 2, nil) // RF 2: one broker is down
			c.Broker(leader).Restart(t)
			waitISR(t, c, topic, 0, 3)
			time.Sleep(500 * time.Millisecond)
			stop()
			<-done
			got := readAllValues(t, c, topic, 0)
			checkAcked(t, log, got)
			checkConformance(t, topic, log, got)
		})
	}
}

// storePluginPid finds the metadata store plugin process that broker pid
// started (vltavad plugin metastore NAME).
func storePluginPid(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte("metastore")) {
			return child
		}
	}
	t.Fatalf("no metadata store plugin process under broker pid %d", pid)
	return 0
}

// logTime finds the first line of a broker log containing all of subs
// after the time from and returns its time.
func logTime(log string, from time.Time, subs ...string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		ts, ok := strings.CutPrefix(line, "time=")
		if !ok {
			continue
		}
		ts, _, _ = strings.Cut(ts, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from) {
			continue
		}
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			return at, true
		}
	}
	return time.Time{}, false
}

// TestStoreSessionLossFencesLeader freezes (SIGSTOP) the store plugin of
// the partition leader's broker, so its ZooKeeper session or etcd lease
// stops being renewed while the broker itself keeps serving. The store
// expires the session, the controller elects another leader, and the
// frozen broker must have stopped acting as leader before that (its
// "fenced" log line precedes the new leader's "leading" line). Every
// acknowledged write is read back.
func TestStoreSessionLossFencesLeader(t *testing.T) {
	for _, store := range metadataStores[1:] {
		t.Run(store, func(t *testing.T) {
			c, _ := startStoreEnsemble(t, store, 3, 1, nil)
			const topic = "session-loss"
			createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
			log := &ackLog{acked: map[string]int64{}}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			done := make(chan struct{})
			go func() { defer close(done); produceLoop(ctx, t, c, topic, log) }()
			time.Sleep(500 * time.Millisecond)
			leader := waitLeader(t, c, topic, 0, 0)
			plugin := storePluginPid(t, c.Broker(leader).Pid())
			frozen := time.Now()
			t.Logf("SIGSTOP the %s plugin (pid %d) of leader broker %d", store, plugin, leader)
			if err := syscall.Kill(plugin, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			thawed := false
			thaw := func() {
				if !thawed {
					syscall.Kill(plugin, syscall.SIGCONT)
					thawed = true
				}
			}
			t.Cleanup(thaw)
			next := waitLeader(t, c, topic, 0, leader)
			var fencedAt, ledAt time.Time
			var fenced, led bool
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !(fenced && led); time.Sleep(100 * time.Millisecond) {
				fencedAt, fenced = logTime(c.Broker(leader).Log(), frozen, "fenced")
				ledAt, led = logTime(c.Broker(next).Log(), frozen, "broker: leading", topic+"-0")
			}
			t.Logf("broker %d fenced after %v; broker %d leading after %v", leader, fencedAt.Sub(frozen), next, ledAt.Sub(frozen))
			if !fenced || !led {
				t.Errorf("log lines: fenced %v (broker %d), leading %v (broker %d)", fenced, leader, led, next)
			} else if !fencedAt.Before(ledAt) {
				t.Errorf("broker %d was fenced at %v, after broker %d started leading at %v: two leaders", leader, fencedAt, next, ledAt)
			}
			thaw()
			// Every broker, the thawed one included, must agree before
			// the log is read: a broker answering from its view of before
			// the freeze would name itself leader.
			waitConverged(t, c, topic, 0, 3)
			time.Sleep(500 * time.Millisecond)
			stop()
			<-done
			got := readAllValues(t, c, topic, 0)
			checkAcked(t, log, got)
			checkConformance(t, topic, log, got)
		})
	}
}

// TestStoreOutage kill -9s the whole one-server store while an acks=all
// producer writes, and restarts it on its data (issue 12, "a whole-store
// outage"). Every broker's keep-alives fail, none reaches the store, so
// none fences itself (core/cluster, "When the whole store is down"):
// produce and fetch go on for the partitions they lead, acknowledged
// writes made during the outage are read back during it, CreateTopics is
// refused with the retriable REQUEST_TIMED_OUT saying the metadata store
// is unreachable, and no leader is elected. When the store is back the
// cluster converges (every broker names the same leader, at the same
// epoch as before, with the full ISR; a topic can be created) and the
// conformance checker finds no lost or duplicated acknowledged write.
// By default it runs an 8 s outage on ZooKeeper; VLTAVA_STORE_OUTAGE=1
// runs the 30 s outage on ZooKeeper and etcd.
func TestStoreOutage(t *testing.T) {
	stores, outage := []string{"zookeeper"}, 8*time.Second
	if os.Getenv("VLTAVA_STORE_OUTAGE") != "" {
		stores, outage = metadataStores[1:], 30*time.Second
	}
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			c, servers := startStoreEnsemble(t, store, 3, 1, nil)
			restart := servers.(interface{ Restart(int) })
			const topic = "outage"
			createReplicated(t, c, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
			leader := waitConverged(t, c, topic, 0, 3)
			before := leaderEpochOf(t, c, topic)
			log := &ackLog{acked: map[string]int64{}}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			done := make(chan struct{})
			go func() { defer close(done); produceLoop(ctx, t, c, topic, log) }()
			time.Sleep(time.Second)
			t.Logf("SIGKILL the %s server for %v (partition leader: broker %d, leader epoch %d)", store, outage, leader, before)
			servers.Kill(0)
			down := time.Now()
			restarted := false
			t.Cleanup(func() {
				if !restarted {
					restart.Restart(0)
				}
			})

			// Past every broker's session timeout (2 s), the lease of each
			// has lapsed: they lead on.
			time.Sleep(3 * time.Second)
			acks := func() int {
				log.mu.Lock()
				defer log.mu.Unlock()
				return len(log.acked)
			}
			during := acks()
			adm := clusterAdmin(t, c)
			resp, err := adm.CreateTopic(testCtx(t, 20*time.Second), 1, 3, nil, "during-outage")
			if err == nil {
				err = resp.Err
			}
			switch {
			case err == nil:
				t.Errorf("a topic was created while the metadata store was down")
			case !errors.Is(err, kerr.RequestTimedOut) || !strings.Contains(resp.ErrMessage, "metadata store"):
				t.Errorf("create during the outage: %v (%q), want REQUEST_TIMED_OUT saying the metadata store is unreachable", err, resp.ErrMessage)
			default:
				t.Logf("create during the outage: %v: %s", err, resp.ErrMessage)
			}
			time.Sleep(outage - time.Since(down) - time.Second)
			// Acknowledged during the outage, and readable during it.
			now := acks()
			if now-during < 50 {
				t.Errorf("%d writes acknowledged during the outage (from %d to %d), want produce to go on", now-during, during, now)
			}
			got := readAllValues(t, c, topic, 0)
			log.mu.Lock()
			missing := 0
			for v, o := range log.acked {
				if got[o] != v && o < int64(len(got)) {
					missing++
				}
			}
			log.mu.Unlock()
			if missing > 0 {
				t.Errorf("%d acknowledged writes not read back during the outage", missing)
			}
			t.Logf("during the outage: %d writes acknowledged, %d records read", now-during, len(got))
			if e := leaderEpochOf(t, c, topic); e != before {
				t.Errorf("leader epoch %d during the outage, was %d", e, before)
			}

			restart.Restart(0)
			restarted = true
			back := time.Now()
			t.Logf("%s back after %v", store, back.Sub(down).Round(time.Millisecond))
			if l := waitConverged(t, c, topic, 0, 3); l != leader {
				t.Errorf("broker %d leads after the outage, broker %d before: a leader was elected", l, leader)
			}
			t.Logf("every broker agrees %v after the store came back", time.Since(back).Round(time.Millisecond))
			if e := leaderEpochOf(t, c, topic); e != before {
				t.Errorf("leader epoch %d after the outage, was %d", e, before)
			}
			created := time.Now()
			createAfterOutage(t, adm)
			t.Logf("a topic was created %v after the store came back (%v of trying)", time.Since(back).Round(time.Millisecond),
				time.Since(created).Round(time.Millisecond))
			time.Sleep(time.Second)
			stop()
			<-done
			got = readAllValues(t, c, topic, 0)
			checkAcked(t, log, got)
			checkConformance(t, topic, log, got)
		})
	}
}

// leaderEpochOf is partition 0's leader epoch as Metadata reports it.
func leaderEpochOf(t *testing.T, c *daemontest.Cluster, topic string) int32 {
	t.Helper()
	st, err := partitionState(t, clusterAdmin(t, c), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st.LeaderEpoch
}

// checkConformance runs the conformance checker (conformance/checker)
// over what the producer of log sent and what the partition holds: one
// producer process whose sends are acknowledged or unknown, and one
// reader that polled got. Any anomaly fails the test.
func checkConformance(t *testing.T, topic string, log *ackLog, got map[int64]string) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	var ops []checker.Op
	now := int64(0)
	tick := func() int64 { now++; return now }
	for seq := range log.sent {
		v := fmt.Sprintf("v-%08d", seq)
		ops = append(ops, checker.Op{ID: int64(seq), Proc: "producer", Type: checker.Invoke, F: checker.Send, Time: tick(), Topic: topic, Offset: -1, Value: v})
		if o, ok := log.acked[v]; ok {
			ops = append(ops, checker.Op{ID: int64(seq), Proc: "producer", Type: checker.OK, F: checker.Send, Time: tick(), Topic: topic, Offset: o, Value: v})
		} else {
			ops = append(ops, checker.Op{ID: int64(seq), Proc: "producer", Type: checker.Info, F: checker.Send, Time: tick(), Topic: topic, Offset: -1, Value: v})
		}
	}
	var reads []checker.Read
	for _, o := range slices.Sorted(maps.Keys(got)) {
		reads = append(reads, checker.Read{Partition: 0, Offset: o, Value: got[o]})
	}
	id := int64(log.sent)
	ops = append(ops,
		checker.Op{ID: id, Proc: "reader", Type: checker.Invoke, F: checker.Poll, Time: tick(), Topic: topic, Offset: -1},
		checker.Op{ID: id, Proc: "reader", Type: checker.OK, F: checker.Poll, Time: tick(), Topic: topic, Offset: -1, Reads: reads})
	rep := checker.Check(ops)
	for i, a := range rep.Anomalies {
		if i == 10 {
			t.Errorf("... %d anomalies in all", len(rep.Anomalies))
			break
		}
		t.Errorf("conformance checker: %s: %s", a.Name, a.Detail)
	}
	t.Logf("conformance checker: %d sends, %d acknowledged, %d unknown, %d values read, anomalies %v", rep.Sends, rep.Acked, rep.Unknown, rep.Read, rep.Names())
}

// waitConverged waits until every running broker, asked itself, names the
// same live leader and leader epoch for partition p, with an ISR of n
// members and no error: the cluster agrees again (a broker answering
// from a stale view, or one that is still fenced, does not count as
// agreement). It returns the leader.
func waitConverged(t *testing.T, c *daemontest.Cluster, topic string, p int32, n int) int32 {
	t.Helper()
	cl := clusterClient(t, c)
	var leader int32
	waitUntil(t, 60*time.Second, fmt.Sprintf("every broker agrees on %s/%d's leader with an ISR of %d", topic, p, n), func() error {
		var first *kmsg.MetadataResponseTopicPartition
		for _, b := range c.Brokers() {
			if !b.Running() {
				continue
			}
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID())))
			cancel()
			if err != nil {
				return fmt.Errorf("broker %d: %v", b.NodeID(), err)
			}
			if len(resp.Topics) != 1 || int(p) >= len(resp.Topics[0].Partitions) {
				return fmt.Errorf("broker %d does not know %s/%d", b.NodeID(), topic, p)
			}
			mp := &resp.Topics[0].Partitions[p]
			switch {
			case mp.ErrorCode != 0:
				return fmt.Errorf("broker %d: %v", b.NodeID(), kerr.ErrorForCode(mp.ErrorCode))
			case mp.Leader < 0 || !c.Broker(mp.Leader).Running():
				return fmt.Errorf("broker %d names leader %d", b.NodeID(), mp.Leader)
			case len(mp.ISR) != n:
				return fmt.Errorf("broker %d names ISR %v", b.NodeID(), mp.ISR)
			case first == nil:
				first = mp
			case mp.Leader != first.Leader || mp.LeaderEpoch != first.LeaderEpoch:
				return fmt.Errorf("brokers disagree: leader %d epoch %d vs leader %d epoch %d",
					first.Leader, first.LeaderEpoch, mp.Leader, mp.LeaderEpoch)
			}
		}
		if first == nil {
			return errors.New("no broker answered")
		}
		leader = first.Leader
		return nil
	})
	return leader
}

// createAfterOutage waits until the cluster takes metadata writes again
// after a store outage: until topic "after-outage" (1 partition, RF 3) is
// created, or exists already.
func createAfterOutage(t *testing.T, adm *kadm.Client) {
	t.Helper()
	waitUntil(t, 30*time.Second, "a topic created after the outage", func() error {
		resp, err := adm.CreateTopic(testCtx(t, 10*time.Second), 1, 3, nil, "after-outage")
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	})
}
