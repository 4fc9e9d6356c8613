package cluster

import (
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/raft"
	"github.com/vltava/vltava/plugins/sdk"
)

// raftStores opens a 3-voter raft metadata store in process, one voter
// per broker, each broker talking to its own voter.
func raftStores(t *testing.T) map[int32]sdk.MetadataStore {
	voters := map[int32]string{}
	lns := map[int32]net.Listener{}
	for id := int32(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		voters[id], lns[id] = ln.Addr().String(), ln
	}
	base := t.TempDir()
	stores := map[int32]sdk.MetadataStore{}
	for id := int32(1); id <= 3; id++ {
		s, err := raft.Open(raft.Config{
			NodeID: id, DataDir: filepath.Join(base, strconv.Itoa(int(id))), Voters: voters, Listener: lns[id],
			Logger: testLogger(), HeartbeatTimeout: 400 * time.Millisecond, ElectionTimeout: 400 * time.Millisecond,
			CommitTimeout: 10 * time.Millisecond, ReapInterval: 20 * time.Millisecond, LeaderWait: waitLimit,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[id] = s
	}
	return stores
}

// Over the raft store: a controller is elected, a topic is placed, the
// controller's session ends (its Node closes) and another takes over,
// and the partitions it led move to the next ISR member.
func TestRaftControllerFailoverAndLeaderElection(t *testing.T) {
	c := newTestCluster(t, raftStores(t))
	// Close revokes the stopped controller's session, so failover does
	// not wait for the TTL; a long TTL keeps a heartbeat that runs late
	// on a loaded machine (-race) from ending a live session, which would
	// elect again and move partitions this test expects to stay.
	c.tune = func(cfg *Config) { cfg.SessionTTL = 6 * time.Second }
	for id := int32(1); id <= 3; id++ {
		c.start(id)
	}
	ctl := c.waitController()
	eventually(t, "every node sees every broker", func() bool {
		for _, n := range c.running() {
			if len(n.Brokers()) != 3 {
				return false
			}
		}
		return true
	})
	if _, err := c.node(1+ctl%3).CreateTopic(ctxT(t), "t", 3, 3, nil, nil); err != nil {
		t.Fatal(err)
	}
	var led []TopicPartition
	for p := int32(0); p < 3; p++ {
		tp := TopicPartition{"t", p}
		if st := c.partition(tp, "is created", func(PartitionState, []int32) bool { return true }); st.Leader == ctl {
			led = append(led, tp)
		}
	}
	if len(led) != 1 {
		t.Fatalf("controller %d leads %v, want one partition", ctl, led)
	}
	before := controllerEpoch(t, c.stores[ctl])
	c.stop(ctl)
	next := c.waitController()
	if next == ctl {
		t.Fatalf("controller did not change")
	}
	// The new controller took a higher epoch than the old one had (an
	// extra election on a loaded machine may take it higher still).
	if got := controllerEpoch(t, c.stores[next]); got <= before {
		t.Errorf("controller epoch %d after failover, want more than %d", got, before)
	}
	for p := int32(0); p < 3; p++ {
		st := c.partition(TopicPartition{"t", p}, "has a live leader", func(st PartitionState, _ []int32) bool {
			return st.Leader != ctl && st.Leader != NoLeader && !slices.Contains(st.ISR, ctl)
		})
		if (led[0].Partition == p) != (st.LeaderEpoch == 1) {
			t.Errorf("partition %d leader epoch %d (led by the old controller: %v)", p, st.LeaderEpoch, led[0].Partition == p)
		}
	}
}
