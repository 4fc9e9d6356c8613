package raft

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config says how a Store joins its quorum. NodeID, DataDir and Voters
// are required; the zero value of every other field picks a default.
type Config struct {
	// NodeID is this broker's node.id; it must be a key of Voters.
	NodeID int32
	// DataDir holds the raft log (raft.db) and snapshots (snapshots/).
	DataDir string
	// QuorumAddr is the host:port the quorum listener binds (for example
	// "0.0.0.0:19091"); empty binds Voters[NodeID]. The address other
	// voters dial is always Voters[NodeID].
	QuorumAddr string
	// Listener, if set, is used instead of binding QuorumAddr (tests hand
	// in a listener bound to port 0). The Store closes it.
	Listener net.Listener
	// Voters maps every voter's node ID to its quorum address, as in
	// controller.quorum.voters; see ParseVoters. Every voter must be given
	// the same map: it is the configuration a new cluster bootstraps with.
	Voters map[int32]string
	// Join makes a node with no raft state wait to be added by the
	// leader (AddVoter) instead of bootstrapping a cluster from Voters.
	// Set it when replacing or adding a voter of a running cluster.
	Join bool
	// NonVoter makes this node a raft non-voter (a learner, like a Kafka
	// broker with process.roles=broker): it is not among Voters, never
	// votes or leads, receives the log like a voter (so watches are served
	// locally) and forwards writes and reads to the leader. On Open it asks
	// a voter to add it (AddNonvoter) at QuorumAddr, which is then required
	// and must be an address the voters can dial (port 0 picks one).
	NonVoter bool
	// Dial, if set, opens every connection this node makes to another
	// node's quorum address (raft RPCs and forwarded requests); nil dials
	// TCP. Tests route a node's traffic through a proxy with it.
	Dial DialFunc
	// ServerTLS and ClientTLS, set together, make the quorum port mutual
	// TLS: every connection accepted completes a TLS handshake with
	// ServerTLS, which must require and verify client certificates
	// (tls.RequireAndVerifyClientCert), before its first byte is read,
	// and every connection to another node presents ClientTLS's
	// certificate. A peer without a certificate from the configured CA
	// is refused and logged.
	ServerTLS, ClientTLS *tls.Config
	// Logger receives quorum, leadership and session reports; nil means
	// slog.Default().
	Logger *slog.Logger

	// Raft timing. HeartbeatTimeout defaults to DefaultHeartbeatTimeout
	// (500ms, half of hashicorp/raft's 1s: a follower notices a dead
	// leader within 0.5-1s, which bounds how long a broker that died
	// with the raft leader keeps its partitions); the others keep
	// hashicorp/raft's defaults (500ms leader lease, 50ms commit
	// timeout). Tests use ~150ms. With a HeartbeatTimeout below 1s,
	// LeaderLeaseTimeout defaults to HeartbeatTimeout (raft requires lease
	// <= heartbeat) and ElectionTimeout to HeartbeatTimeout.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one (default 8192); SnapshotInterval how often that is
	// checked (default 2 minutes); TrailingLogs how many entries are kept
	// after a snapshot for slow followers (default 10240).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	// LeaderWait bounds how long a request waits for a reachable leader
	// before it fails with sdk.ErrUnavailable (default 10s).
	LeaderWait time.Duration
	// ReapInterval is how often the leader looks for expired sessions
	// (default 50ms); it is the granularity of session expiry.
	ReapInterval time.Duration

	// WatchHistory is how many recent events each node keeps for watches
	// that start from an older revision (default 10,000).
	WatchHistory int
	// WatchBuffer is how many events a watcher may lag behind before its
	// stream ends with sdk.ErrWatchOverflow (default 1,024).
	WatchBuffer int
	// MaxValueBytes caps a value (default 1 MiB).
	MaxValueBytes int
}

// DefaultHeartbeatTimeout is Config.HeartbeatTimeout's default.
const DefaultHeartbeatTimeout = 500 * time.Millisecond

// maxKeyBytes caps a key, as the local store does.
const maxKeyBytes = 4096

func (c *Config) check() error {
	if c.DataDir == "" {
		return fmt.Errorf("raft: config: DataDir is required")
	}
	if len(c.Voters) == 0 {
		return fmt.Errorf("raft: config: Voters is empty")
	}
	_, voter := c.Voters[c.NodeID]
	switch {
	case c.NonVoter && voter:
		return fmt.Errorf("raft: config: non-voter node %d is among the voters %s", c.NodeID, FormatVoters(c.Voters))
	case c.NonVoter:
		if err := checkDialable(c.QuorumAddr); err != nil && c.Listener == nil {
			return fmt.Errorf("raft: config: non-voter quorum address: %w", err)
		}
	case !voter:
		return fmt.Errorf("raft: config: node %d is not among the voters %s", c.NodeID, FormatVoters(c.Voters))
	}
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		return fmt.Errorf("raft: config: ServerTLS and ClientTLS go together")
	}
	if c.ServerTLS != nil && c.ServerTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return fmt.Errorf("raft: config: the quorum port's TLS must require and verify client certificates")
	}
	for id, addr := range c.Voters {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("raft: config: voter %d address %q: %w", id, addr, err)
		}
	}
	return nil
}

// checkDialable refuses an address other nodes could not dial back.
func checkDialable(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%q: give a host the voters can dial, not a wildcard", addr)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.QuorumAddr == "" && !c.NonVoter {
		c.QuorumAddr = c.Voters[c.NodeID]
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.HeartbeatTimeout > 0 && c.LeaderLeaseTimeout == 0 && c.HeartbeatTimeout < time.Second {
		c.LeaderLeaseTimeout = c.HeartbeatTimeout
	}
	if c.HeartbeatTimeout > 0 && c.ElectionTimeout == 0 {
		c.ElectionTimeout = c.HeartbeatTimeout
	}
	if c.LeaderWait <= 0 {
		c.LeaderWait = 10 * time.Second
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = 50 * time.Millisecond
	}
	if c.WatchHistory <= 0 {
		c.WatchHistory = 10_000
	}
	if c.WatchBuffer <= 0 {
		c.WatchBuffer = 1024
	}
	if c.MaxValueBytes <= 0 {
		c.MaxValueBytes = 1 << 20
	}
}

// ParseVoters parses controller.quorum.voters: "1@host:port,2@host:port".
func ParseVoters(s string) (map[int32]string, error) {
	out := make(map[int32]string)
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		idStr, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("raft: voter %q: want id@host:port", part)
		}
		id, err := strconv.ParseInt(idStr, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("raft: voter %q: bad node id", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("raft: voter %q: %w", part, err)
		}
		if _, dup := out[int32(id)]; dup {
			return nil, fmt.Errorf("raft: voter %d named twice", id)
		}
		out[int32(id)] = addr
	}
	return out, nil
}

// FormatVoters renders voters as ParseVoters reads them, sorted by ID.
func FormatVoters(voters map[int32]string) string {
	ids := make([]int32, 0, len(voters))
	for id := range voters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id)) + "@" + voters[id]
	}
	return strings.Join(parts, ",")
}
