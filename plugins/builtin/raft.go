package builtin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vltava/vltava/core/tlsconf"
	"github.com/vltava/vltava/plugins/metastore/raft"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// RaftConfig is the config of the built-in "raft" metadata store. The
// broker fills node.id, data.dir, voters and quorum.listen from its own
// keys (node.id, log.dirs, controller.quorum.voters,
// controller.quorum.listen); the rest are optional.
type RaftConfig struct {
	NodeID int32 `mapstructure:"node.id"`
	// DataDir holds the raft log and snapshots.
	DataDir string `mapstructure:"data.dir"`
	// Voters is controller.quorum.voters: "1@host:port,2@host:port,...".
	Voters string `mapstructure:"voters"`
	// QuorumListen is the host:port to bind; empty binds Voters[NodeID].
	QuorumListen string `mapstructure:"quorum.listen"`
	// Join waits to be added by a running cluster instead of
	// bootstrapping one (replacing a voter).
	Join bool `mapstructure:"join"`
	// NonVoter joins as a raft non-voter (process.roles=broker): the node
	// is not among the voters and quorum.listen must be dialable.
	NonVoter bool `mapstructure:"non.voter"`

	HeartbeatTimeout time.Duration `mapstructure:"heartbeat.timeout"`
	ElectionTimeout  time.Duration `mapstructure:"election.timeout"`
	LeaderWait       time.Duration `mapstructure:"leader.wait"`
	WatchHistory     int           `mapstructure:"watch.history"`
	WatchBuffer      int           `mapstructure:"watch.buffer"`
	MaxValueBytes    int           `mapstructure:"max.value.bytes"`

	// Mutual TLS on the quorum port (the broker passes its own ssl.* keys
	// when controller.quorum.security.protocol is SSL): with a keystore
	// set, every node must present a certificate from the truststore's
	// CAs, and is refused otherwise. PEM only, as for the listeners.
	SSLKeystoreLocation         string `mapstructure:"ssl.keystore.location"`
	SSLKeystoreCertificateChain string `mapstructure:"ssl.keystore.certificate.chain"`
	SSLKeystoreKey              string `mapstructure:"ssl.keystore.key"`
	SSLKeyPassword              string `mapstructure:"ssl.key.password"`
	SSLTruststoreLocation       string `mapstructure:"ssl.truststore.location"`
	SSLTruststoreCertificates   string `mapstructure:"ssl.truststore.certificates"`
	// SSLEndpointIdentificationAlgorithm "https" (the default) checks a
	// voter's certificate against the host in controller.quorum.voters;
	// "none" checks only that the CA signed it.
	SSLEndpointIdentificationAlgorithm string `mapstructure:"ssl.endpoint.identification.algorithm"`
}

// quorumTLS builds the quorum port's mutual TLS, nil without a keystore.
func (c RaftConfig) quorumTLS() (server, client *tls.Config, err error) {
	f := tlsconf.Files{
		KeystoreLocation: c.SSLKeystoreLocation, KeystoreCertificateChain: c.SSLKeystoreCertificateChain,
		KeystoreKey: c.SSLKeystoreKey, KeyPassword: c.SSLKeyPassword,
		TruststoreLocation: c.SSLTruststoreLocation, TruststoreCertificates: c.SSLTruststoreCertificates,
		VerifyHostname: !strings.EqualFold(c.SSLEndpointIdentificationAlgorithm, "none"),
	}
	if !f.HasKeystore() {
		return nil, nil, nil
	}
	if !f.HasTruststore() {
		return nil, nil, fmt.Errorf("config: quorum TLS needs ssl.truststore.location: %w", sdk.ErrInvalidArgument)
	}
	if server, err = f.Server("required"); err != nil {
		return nil, nil, fmt.Errorf("config: quorum TLS: %v: %w", err, sdk.ErrInvalidArgument)
	}
	if client, err = f.Client(); err != nil {
		return nil, nil, fmt.Errorf("config: quorum TLS: %v: %w", err, sdk.ErrInvalidArgument)
	}
	return server, client, nil
}

// RaftStore is the raft store as a plugin: Configure opens it. Calls
// before that fail with sdk.ErrUnavailable.
type RaftStore struct {
	mu sync.Mutex
	st *raft.Store
}

var (
	_ sdk.MetadataStore = (*RaftStore)(nil)
	_ sdk.Compactor     = (*RaftStore)(nil)
	_ serve.Configurer  = (*RaftStore)(nil)
)

// Configure decodes RaftConfig and opens (joins) the quorum. It does not
// wait for a leader.
func (r *RaftStore) Configure(_ context.Context, raw map[string]any) error {
	var cfg RaftConfig
	if err := serve.DecodeConfig(raw, &cfg); err != nil {
		return err
	}
	if cfg.DataDir == "" || cfg.Voters == "" {
		return fmt.Errorf("config: keys \"data.dir\" and \"voters\" are required: %w", sdk.ErrInvalidArgument)
	}
	voters, err := raft.ParseVoters(cfg.Voters)
	if err != nil {
		return fmt.Errorf("config: voters: %v: %w", err, sdk.ErrInvalidArgument)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("raft plugin: %w", err)
	}
	serverTLS, clientTLS, err := cfg.quorumTLS()
	if err != nil {
		return err
	}
	st, err := raft.Open(raft.Config{
		ServerTLS: serverTLS, ClientTLS: clientTLS,
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, QuorumAddr: cfg.QuorumListen, Voters: voters, Join: cfg.Join, NonVoter: cfg.NonVoter,
		Logger: slog.Default(), HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
		LeaderWait: cfg.LeaderWait, WatchHistory: cfg.WatchHistory, WatchBuffer: cfg.WatchBuffer, MaxValueBytes: cfg.MaxValueBytes,
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st != nil {
		st.Close()
		return errors.New("raft plugin: already configured")
	}
	r.st = st
	return nil
}

var errRaftNotConfigured = fmt.Errorf("raft plugin: not configured yet: %w", sdk.ErrUnavailable)

func raftCall[Req, Resp any](r *RaftStore, ctx context.Context, req Req, f func(*raft.Store, context.Context, Req) (Resp, error)) (Resp, error) {
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	if st == nil {
		var zero Resp
		return zero, errRaftNotConfigured
	}
	return f(st, ctx, req)
}

// Get calls the open store.
func (r *RaftStore) Get(ctx context.Context, req *sdk.GetRequest) (*sdk.GetResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).Get)
}

// List calls the open store.
func (r *RaftStore) List(ctx context.Context, req *sdk.ListRequest) (*sdk.ListResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).List)
}

// Put calls the open store.
func (r *RaftStore) Put(ctx context.Context, req *sdk.PutRequest) (*sdk.PutResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).Put)
}

// Delete calls the open store.
func (r *RaftStore) Delete(ctx context.Context, req *sdk.DeleteRequest) (*sdk.DeleteResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).Delete)
}

// Txn calls the open store.
func (r *RaftStore) Txn(ctx context.Context, req *sdk.TxnRequest) (*sdk.TxnResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).Txn)
}

// Watch calls the open store.
func (r *RaftStore) Watch(ctx context.Context, req *sdk.WatchRequest) (sdk.WatchStream, error) {
	return raftCall(r, ctx, req, (*raft.Store).Watch)
}

// GrantSession calls the open store.
func (r *RaftStore) GrantSession(ctx context.Context, req *sdk.GrantSessionRequest) (*sdk.GrantSessionResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).GrantSession)
}

// KeepAlive calls the open store.
func (r *RaftStore) KeepAlive(ctx context.Context, req *sdk.KeepAliveRequest) (*sdk.KeepAliveResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).KeepAlive)
}

// RevokeSession calls the open store.
func (r *RaftStore) RevokeSession(ctx context.Context, req *sdk.RevokeSessionRequest) (*sdk.RevokeSessionResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).RevokeSession)
}

// Compact calls the open store.
func (r *RaftStore) Compact(ctx context.Context, req *sdk.CompactRequest) (*sdk.CompactResponse, error) {
	return raftCall(r, ctx, req, (*raft.Store).Compact)
}

// Close leaves the quorum if the store was opened.
func (r *RaftStore) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st == nil {
		return nil
	}
	return r.st.Close()
}
