package clustertest

import (
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vltava/vltava/plugins/metastore/raft"
	"github.com/vltava/vltava/plugins/sdk"
)

// Network is the set of blackholes around one node of an IsolatedRaft
// quorum.
type Network []*Blackhole

// Cut silently drops everything the node sends to or receives from the
// other voters.
func (n Network) Cut() {
	for _, p := range n {
		p.Cut()
	}
}

// Heal drops the connections Cut froze and lets new ones through.
func (n Network) Heal() {
	for _, p := range n {
		p.Heal()
	}
}

// IsolatedRaft opens a three-voter raft metadata store in this process
// (voter IDs 1..3, one store per broker) with test timings (400ms
// heartbeat and election timeouts), every byte node cut sends to or
// receives from the other voters going through blackholes: its quorum
// address is a proxy, and it dials the others through proxies of its
// own. The stores and proxies are closed at cleanup.
func IsolatedRaft(t testing.TB, cut int32, logger *slog.Logger, leaderWait time.Duration) (map[int32]sdk.MetadataStore, Network) {
	t.Helper()
	real := map[int32]string{}
	lns := map[int32]net.Listener{}
	for id := int32(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		real[id], lns[id] = ln.Addr().String(), ln
	}
	in := NewBlackhole(t, real[cut])
	network := Network{in}
	out := map[string]string{} // real address → proxy address, for node cut's dials
	voters := map[int32]string{}
	for id, addr := range real {
		voters[id] = addr
		if id == cut {
			voters[id] = in.Addr()
			continue
		}
		p := NewBlackhole(t, addr)
		network = append(network, p)
		out[addr] = p.Addr()
	}
	dial := func(addr string, timeout time.Duration) (net.Conn, error) {
		if p, ok := out[addr]; ok {
			addr = p
		}
		return net.DialTimeout("tcp", addr, timeout)
	}
	base := t.TempDir()
	stores := map[int32]sdk.MetadataStore{}
	for id := int32(1); id <= 3; id++ {
		cfg := raft.Config{
			NodeID: id, DataDir: filepath.Join(base, strconv.Itoa(int(id))), Voters: voters, Listener: lns[id],
			Logger: logger, HeartbeatTimeout: 400 * time.Millisecond, ElectionTimeout: 400 * time.Millisecond,
			CommitTimeout: 10 * time.Millisecond, ReapInterval: 20 * time.Millisecond, LeaderWait: leaderWait,
		}
		if id == cut {
			cfg.Dial = dial
		}
		s, err := raft.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[id] = s
	}
	return stores, network
}
