// Package config holds Vltava's typed configuration: the broker's settings,
// named after Kafka's broker config keys, and the per-topic settings with
// the broker keys that supply their defaults.
package config

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// Broker is a broker's configuration. The mapstructure tags are Kafka's
// broker config names; a config file uses exactly these keys.
type Broker struct {
	NodeID int32 `mapstructure:"node.id"`
	// Listeners, AdvertisedListeners, ListenerSecurityProtocolMap and
	// InterBrokerListenerName are Kafka's listener keys; see listeners.go.
	Listeners                   string `mapstructure:"listeners"`            // NAME://host:port,...; a bare host:port is PLAINTEXT
	AdvertisedListeners         string `mapstructure:"advertised.listeners"` // NAME://host:port per listener; unnamed ones advertise their bound address
	ListenerSecurityProtocolMap string `mapstructure:"listener.security.protocol.map"`
	InterBrokerListenerName     string `mapstructure:"inter.broker.listener.name"` // empty: the first listener
	LogDirs                     string `mapstructure:"log.dirs"`                   // data directory
	ClusterID                   string `mapstructure:"cluster.id"`                 // empty: generated once and kept in the data dir
	BrokerRack                  string `mapstructure:"broker.rack"`

	NumPartitions            int32 `mapstructure:"num.partitions"`
	DefaultReplicationFactor int16 `mapstructure:"default.replication.factor"`
	AutoCreateTopicsEnable   bool  `mapstructure:"auto.create.topics.enable"`
	DeleteTopicEnable        bool  `mapstructure:"delete.topic.enable"`

	MessageMaxBytes       int32 `mapstructure:"message.max.bytes"`
	SocketRequestMaxBytes int32 `mapstructure:"socket.request.max.bytes"`
	ConnectionsMaxIdleMs  int64 `mapstructure:"connections.max.idle.ms"`
	// QueuedMaxRequestBytes bounds the memory of request frames read and
	// not yet handled, broker-wide (core/wire's request pool). Kafka's
	// default is -1 (unlimited); Vltava's is 256 MiB. -1 (any value <= 0)
	// turns the bound off; otherwise it must be at least
	// socket.request.max.bytes.
	QueuedMaxRequestBytes int64 `mapstructure:"queued.max.request.bytes"`
	// MaxConnections bounds the connections open at once; more are closed
	// as soon as they are accepted. 0 (Vltava's default; Kafka's is
	// unlimited) derives it from the open-file limit: half of it, at most
	// 65536 (wire.DefaultMaxConnections).
	MaxConnections int32 `mapstructure:"max.connections"`
	// MaxConnectionsPerIP bounds them per client IP address (Kafka's
	// default, unlimited: 2147483647); MaxConnectionsPerIPOverrides sets
	// other limits for some addresses: "127.0.0.1:200,10.0.0.7:0". IP
	// addresses only, no host names.
	MaxConnectionsPerIP          int32  `mapstructure:"max.connections.per.ip"`
	MaxConnectionsPerIPOverrides string `mapstructure:"max.connections.per.ip.overrides"`
	// ZeroCopy sends fetched records with sendfile on plaintext listeners.
	// It has no Kafka counterpart; turning it off exists for measurement.
	ZeroCopy bool `mapstructure:"zero.copy.enable"`

	// TLS (security.go). Kafka's keys; only PEM keystores and truststores
	// (ssl.keystore.type=PEM), as files or inline.
	SslKeystoreType                    string `mapstructure:"ssl.keystore.type"`
	SslKeystoreLocation                string `mapstructure:"ssl.keystore.location"`          // PEM: certificate chain and private key
	SslKeystoreCertificateChain        string `mapstructure:"ssl.keystore.certificate.chain"` // inline PEM instead of a file
	SslKeystoreKey                     string `mapstructure:"ssl.keystore.key" sensitive:"true"`
	SslKeyPassword                     string `mapstructure:"ssl.key.password" sensitive:"true"` // for a legacy-encrypted PEM key
	SslTruststoreType                  string `mapstructure:"ssl.truststore.type"`
	SslTruststoreLocation              string `mapstructure:"ssl.truststore.location"`     // PEM CA certificates
	SslTruststoreCertificates          string `mapstructure:"ssl.truststore.certificates"` // inline PEM instead of a file
	SslClientAuth                      string `mapstructure:"ssl.client.auth"`             // none, requested or required
	SslPrincipalMappingRules           string `mapstructure:"ssl.principal.mapping.rules"`
	SslEndpointIdentificationAlgorithm string `mapstructure:"ssl.endpoint.identification.algorithm"` // "https" checks peer host names; "" does not

	// SASL on the listeners and between brokers.
	SaslServerMaxReceiveSize int32 `mapstructure:"sasl.server.max.receive.size"`
	ConnectionsMaxReauthMs   int64 `mapstructure:"connections.max.reauth.ms"`
	// SaslMechanismInterBrokerProtocol is the mechanism brokers use on a
	// SASL inter-broker listener (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)
	// with InterBrokerSaslUsername and InterBrokerSaslPassword: Vltava's
	// keys in place of Kafka's listener.name.<l>.<mech>.sasl.jaas.config.
	SaslMechanismInterBrokerProtocol string `mapstructure:"sasl.mechanism.inter.broker.protocol"`
	InterBrokerSaslUsername          string `mapstructure:"inter.broker.sasl.username"`
	InterBrokerSaslPassword          string `mapstructure:"inter.broker.sasl.password" sensitive:"true"`
	// ControllerQuorumSecurityProtocol secures the raft quorum port:
	// PLAINTEXT (default) or SSL, mutual TLS between every node of the
	// quorum with the broker's ssl.keystore.* and ssl.truststore.*.
	ControllerQuorumSecurityProtocol string `mapstructure:"controller.quorum.security.protocol"`
	// MetricsListen is the host:port of the HTTP listener serving
	// /metrics, /healthz and /readyz (daemon/metrics); empty turns it off.
	// Vltava's own key (Kafka exports through JMX).
	MetricsListen string `mapstructure:"metrics.listen"`
	// ConsoleEnable serves the web console under /ui/ on the metrics
	// listener: on a loopback address always, elsewhere only once SASL
	// authentication is configured (daemon/console).
	ConsoleEnable bool `mapstructure:"console.enable"`

	// Client quotas (core/quota): the rate of each quota entity is measured
	// over QuotaWindowNum windows of QuotaWindowSizeSeconds.
	QuotaWindowNum         int32 `mapstructure:"quota.window.num"`
	QuotaWindowSizeSeconds int32 `mapstructure:"quota.window.size.seconds"`

	LogSegmentBytes             int64  `mapstructure:"log.segment.bytes"`
	LogRollMs                   int64  `mapstructure:"log.roll.ms"`
	LogRetentionMs              int64  `mapstructure:"log.retention.ms"`
	LogRetentionBytes           int64  `mapstructure:"log.retention.bytes"`
	LogIndexIntervalBytes       int32  `mapstructure:"log.index.interval.bytes"`
	LogFlushIntervalMessages    int64  `mapstructure:"log.flush.interval.messages"`
	LogFlushIntervalMs          int64  `mapstructure:"log.flush.interval.ms"`
	LogRetentionCheckIntervalMs int64  `mapstructure:"log.retention.check.interval.ms"`
	LogMessageTimestampType     string `mapstructure:"log.message.timestamp.type"`
	// KIP-937: a CreateTime record more than this far before (after) the
	// broker's clock is refused with INVALID_TIMESTAMP; math.MaxInt64,
	// the default, never refuses.
	LogMessageTimestampBeforeMaxMs int64  `mapstructure:"log.message.timestamp.before.max.ms"`
	LogMessageTimestampAfterMaxMs  int64  `mapstructure:"log.message.timestamp.after.max.ms"`
	LogCleanupPolicy               string `mapstructure:"log.cleanup.policy"`
	LogCleanerDeleteRetentionMs    int64  `mapstructure:"log.cleaner.delete.retention.ms"`
	MinInsyncReplicas              int32  `mapstructure:"min.insync.replicas"`
	UncleanLeaderElectionEnable    bool   `mapstructure:"unclean.leader.election.enable"`
	CompressionType                string `mapstructure:"compression.type"`

	// Log cleaner (compaction, core/log Cleaner).
	LogCleanerEnable              bool    `mapstructure:"log.cleaner.enable"`
	LogCleanerMinCleanableRatio   float64 `mapstructure:"log.cleaner.min.cleanable.ratio"`
	LogCleanerMinCompactionLagMs  int64   `mapstructure:"log.cleaner.min.compaction.lag.ms"`
	LogCleanerMaxCompactionLagMs  int64   `mapstructure:"log.cleaner.max.compaction.lag.ms"`
	LogCleanerIOMaxBytesPerSecond float64 `mapstructure:"log.cleaner.io.max.bytes.per.second"`
	LogCleanerDedupeBufferSize    int64   `mapstructure:"log.cleaner.dedupe.buffer.size"`
	LogCleanerBackoffMs           int64   `mapstructure:"log.cleaner.backoff.ms"`

	// Group coordinator (core/group).
	OffsetsTopicNumPartitions        int32  `mapstructure:"offsets.topic.num.partitions"`
	OffsetsRetentionMinutes          int64  `mapstructure:"offsets.retention.minutes"`
	OffsetsRetentionCheckIntervalMs  int64  `mapstructure:"offsets.retention.check.interval.ms"`
	OffsetMetadataMaxBytes           int32  `mapstructure:"offset.metadata.max.bytes"`
	GroupInitialRebalanceDelayMs     int64  `mapstructure:"group.initial.rebalance.delay.ms"`
	GroupMinSessionTimeoutMs         int64  `mapstructure:"group.min.session.timeout.ms"`
	GroupMaxSessionTimeoutMs         int64  `mapstructure:"group.max.session.timeout.ms"`
	GroupConsumerSessionTimeoutMs    int64  `mapstructure:"group.consumer.session.timeout.ms"`
	GroupConsumerHeartbeatIntervalMs int64  `mapstructure:"group.consumer.heartbeat.interval.ms"`
	GroupConsumerAssignors           string `mapstructure:"group.consumer.assignors"` // comma-separated, preferred first

	// SaslEnabledMechanisms lists, comma-separated, the SASL mechanisms a
	// SASL_PLAINTEXT listener offers ("PLAIN,SCRAM-SHA-256"); each must be
	// offered by a configured authenticator. Empty (Vltava's default;
	// Kafka's is GSSAPI) offers every mechanism the authenticators offer.
	SaslEnabledMechanisms string `mapstructure:"sasl.enabled.mechanisms"`

	// Plugins (plugins/host). Each entry names a built-in plugin (served
	// by the vltavad binary itself) or an executable path; a plugin's
	// free-form config map is keyed by that entry as written.
	//
	// MetadataStore is the metadata store plugin ("local": one bbolt
	// file, whose path defaults to <log.dirs>/meta/local.db).
	MetadataStore       string         `mapstructure:"metadata.store"`
	MetadataStoreConfig map[string]any `mapstructure:"metadata.store.config"`
	// ZookeeperConnect is Kafka's zookeeper.connect, "h:p,h:p/chroot": the
	// ensemble of metadata.store zookeeper (its config key "connect").
	// ZookeeperSessionTimeoutMs is its session timeout; 0 takes
	// broker.session.timeout.ms, so a dead broker is seen as soon as
	// with the other stores.
	ZookeeperConnect          string `mapstructure:"zookeeper.connect"`
	ZookeeperSessionTimeoutMs int64  `mapstructure:"zookeeper.session.timeout.ms"`
	// GroupConsumerAssignorConfig maps a group.consumer.assignors entry to
	// its plugin's config.
	GroupConsumerAssignorConfig map[string]map[string]any `mapstructure:"group.consumer.assignor.config"`
	// SaslAuthenticators lists, comma-separated, the authenticator plugins
	// (executable paths; no built-in yet) serving SASL_PLAINTEXT
	// listeners, in order of preference.
	SaslAuthenticators      string                    `mapstructure:"sasl.authenticators"`
	SaslAuthenticatorConfig map[string]map[string]any `mapstructure:"sasl.authenticator.config"`

	// Replication (issue 5). ControllerQuorumVoters is Kafka's
	// "1@host:port,2@host:port,..."; when set, the broker joins a cluster
	// whose metadata lives in the raft store those voters run (metadata.store
	// "local" then means "raft"). ControllerQuorumListen is the host:port
	// this node's quorum listener binds (Kafka puts it in listeners under
	// controller.listener.names; Vltava has a key of its own); empty binds
	// this node's address in the voters list.
	ControllerQuorumVoters string `mapstructure:"controller.quorum.voters"`
	ControllerQuorumListen string `mapstructure:"controller.quorum.listen"`
	// ProcessRoles is Kafka's process.roles: "broker,controller" (the
	// default: a Kafka broker that is also a voter of the metadata quorum
	// when controller.quorum.voters is set), "broker" (serves Kafka but
	// uses the quorum without voting: its node.id is not among the voters;
	// it follows the raft log as a non-voter, so controller.quorum.listen
	// must be an address the voters can dial) or "controller" (runs only
	// the metadata quorum voter: no Kafka listener, no logs). See Roles.
	ProcessRoles string `mapstructure:"process.roles"`
	// BrokerSessionTimeoutMs is how long a silent broker keeps its
	// registration (and its leaderships); BrokerHeartbeatIntervalMs how
	// often it renews it.
	BrokerSessionTimeoutMs    int64 `mapstructure:"broker.session.timeout.ms"`
	BrokerHeartbeatIntervalMs int64 `mapstructure:"broker.heartbeat.interval.ms"`
	// ReplicaLagTimeMaxMs: a follower that has not caught up to the
	// leader's log end for this long leaves the ISR.
	ReplicaLagTimeMaxMs       int64 `mapstructure:"replica.lag.time.max.ms"`
	ReplicaFetchWaitMaxMs     int32 `mapstructure:"replica.fetch.wait.max.ms"`
	ReplicaFetchMaxBytes      int32 `mapstructure:"replica.fetch.max.bytes"`
	AutoLeaderRebalanceEnable bool  `mapstructure:"auto.leader.rebalance.enable"`
	ControlledShutdownEnable  bool  `mapstructure:"controlled.shutdown.enable"`
	// OffsetsTopicReplicationFactor is __consumer_offsets' replication
	// factor, capped at the number of live brokers when it is created.
	OffsetsTopicReplicationFactor int16 `mapstructure:"offsets.topic.replication.factor"`

	// Authorization (core/acl). Authorizer "acl" checks every request
	// against the ACLs in the metadata store; empty authorizes nothing
	// (Kafka without authorizer.class.name). SuperUsers is Kafka's
	// super.users, "User:admin;User:broker": allowed everything, and what
	// the inter-broker principal must be. AllowEveryoneIfNoACLFound
	// allows a request on a resource no ACL names.
	Authorizer                string `mapstructure:"authorizer"`
	SuperUsers                string `mapstructure:"super.users"`
	AllowEveryoneIfNoACLFound bool   `mapstructure:"allow.everyone.if.no.acl.found"`

	// Transaction coordinator (core/txn, core/broker/txns.go): Kafka's
	// names and defaults. __transaction_state is created on first use
	// with these settings; its replication factor and min ISR are capped
	// by the live brokers.
	TransactionStateLogNumPartitions     int32 `mapstructure:"transaction.state.log.num.partitions"`
	TransactionStateLogReplicationFactor int16 `mapstructure:"transaction.state.log.replication.factor"`
	TransactionStateLogMinIsr            int32 `mapstructure:"transaction.state.log.min.isr"`
	TransactionStateLogSegmentBytes      int64 `mapstructure:"transaction.state.log.segment.bytes"`
	TransactionMaxTimeoutMs              int32 `mapstructure:"transaction.max.timeout.ms"`
	// TransactionAbortTimedOutTransactionCleanupIntervalMs is how often
	// the coordinator looks for transactions past their timeout and
	// aborts them.
	TransactionAbortTimedOutTransactionCleanupIntervalMs int64 `mapstructure:"transaction.abort.timed.out.transaction.cleanup.interval.ms"`
	// TransactionalIDExpirationMs is how long a transactional ID may go
	// without a transaction before the coordinator forgets it (a
	// tombstone in __transaction_state); its next InitProducerId gets a
	// new producer ID. TransactionRemoveExpiredTransactionCleanupIntervalMs
	// is how often the coordinator looks for such IDs.
	TransactionalIDExpirationMs                          int64 `mapstructure:"transactional.id.expiration.ms"`
	TransactionRemoveExpiredTransactionCleanupIntervalMs int64 `mapstructure:"transaction.remove.expired.transaction.cleanup.interval.ms"`
}

// PluginConfigKeys are the broker keys whose values are plugin config
// maps: one map, or one map per plugin (Depth 2), rather than scalars.
var PluginConfigKeys = []struct {
	Key   string
	Depth int
}{
	{"metadata.store.config", 1},
	{"group.consumer.assignor.config", 2},
	{"sasl.authenticator.config", 2},
}

// SplitList splits a comma-separated list config, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// SASLMechanisms returns sasl.enabled.mechanisms as a list (nil when
// empty, meaning every mechanism the authenticators offer).
func (b Broker) SASLMechanisms() []string {
	var out []string
	for _, m := range strings.Split(b.SaslEnabledMechanisms, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// DefaultMetricsListen is metrics.listen's default. When it is taken (a
// second broker on the same host) the daemon runs without metrics and
// says so, rather than refusing to start; any other address must bind.
const DefaultMetricsListen = "127.0.0.1:9644"

// DefaultBroker returns Kafka's defaults, with Vltava's single-node
// choices: listen on 127.0.0.1:9092, data in ./data, topics auto-created.
func DefaultBroker() Broker {
	return Broker{
		NodeID:                             1,
		Listeners:                          "127.0.0.1:9092",
		LogDirs:                            "./data",
		NumPartitions:                      1,
		DefaultReplicationFactor:           1,
		AutoCreateTopicsEnable:             true,
		DeleteTopicEnable:                  true,
		MessageMaxBytes:                    1048588,
		SocketRequestMaxBytes:              100 * 1024 * 1024,
		ConnectionsMaxIdleMs:               600000,
		QueuedMaxRequestBytes:              256 << 20,
		MaxConnectionsPerIP:                math.MaxInt32,
		ZeroCopy:                           true,
		SslKeystoreType:                    "PEM",
		SslTruststoreType:                  "PEM",
		SslClientAuth:                      "none",
		SslPrincipalMappingRules:           "DEFAULT",
		SaslServerMaxReceiveSize:           524288,
		SslEndpointIdentificationAlgorithm: "https",
		ControllerQuorumSecurityProtocol:   "PLAINTEXT",
		MetricsListen:                      DefaultMetricsListen,
		ConsoleEnable:                      true,
		QuotaWindowNum:                     11,
		QuotaWindowSizeSeconds:             1,
		LogSegmentBytes:                    1 << 30,
		LogRollMs:                          7 * 24 * 3600 * 1000,
		LogRetentionMs:                     7 * 24 * 3600 * 1000,
		LogRetentionBytes:                  -1,
		LogIndexIntervalBytes:              4096,
		LogFlushIntervalMessages:           math.MaxInt64,
		LogFlushIntervalMs:                 math.MaxInt64,
		LogRetentionCheckIntervalMs:        300000,
		LogMessageTimestampType:            "CreateTime",
		LogMessageTimestampBeforeMaxMs:     math.MaxInt64,
		LogMessageTimestampAfterMaxMs:      math.MaxInt64,
		LogCleanupPolicy:                   "delete",
		LogCleanerDeleteRetentionMs:        86400000,
		MinInsyncReplicas:                  1,
		CompressionType:                    "producer",

		LogCleanerEnable:              true,
		LogCleanerMinCleanableRatio:   0.5,
		LogCleanerMaxCompactionLagMs:  math.MaxInt64,
		LogCleanerIOMaxBytesPerSecond: math.MaxFloat64,
		LogCleanerDedupeBufferSize:    128 << 20,
		LogCleanerBackoffMs:           15000,

		OffsetsTopicNumPartitions:        50,
		OffsetsRetentionMinutes:          7 * 24 * 60,
		OffsetsRetentionCheckIntervalMs:  600000,
		OffsetMetadataMaxBytes:           4096,
		GroupInitialRebalanceDelayMs:     3000,
		GroupMinSessionTimeoutMs:         6000,
		GroupMaxSessionTimeoutMs:         1800000,
		GroupConsumerSessionTimeoutMs:    45000,
		GroupConsumerHeartbeatIntervalMs: 5000,
		GroupConsumerAssignors:           "uniform,range",

		MetadataStore: "local",
		ProcessRoles:  "broker,controller",

		BrokerSessionTimeoutMs:        9000,
		BrokerHeartbeatIntervalMs:     2000,
		ReplicaLagTimeMaxMs:           30000,
		ReplicaFetchWaitMaxMs:         500,
		ReplicaFetchMaxBytes:          1 << 20,
		AutoLeaderRebalanceEnable:     true,
		ControlledShutdownEnable:      true,
		OffsetsTopicReplicationFactor: 3,

		TransactionStateLogNumPartitions:                     50,
		TransactionStateLogReplicationFactor:                 3,
		TransactionStateLogMinIsr:                            2,
		TransactionStateLogSegmentBytes:                      104857600,
		TransactionMaxTimeoutMs:                              900000,
		TransactionAbortTimedOutTransactionCleanupIntervalMs: 10000,
		TransactionalIDExpirationMs:                          604800000,
		TransactionRemoveExpiredTransactionCleanupIntervalMs: 3600000,
	}
}

// Validate reports the first setting that cannot work, naming its key.
func (b Broker) Validate() error {
	if err := b.validateSecurity(); err != nil {
		return err
	}
	checks := []struct {
		key string
		ok  bool
	}{
		{"node.id", b.NodeID >= 0},
		{"log.dirs", b.LogDirs != ""},
		{"num.partitions", b.NumPartitions >= 1},
		{"default.replication.factor", b.DefaultReplicationFactor >= 1},
		{"message.max.bytes", b.MessageMaxBytes > 0},
		{"socket.request.max.bytes", b.SocketRequestMaxBytes > 0},
		{"queued.max.request.bytes", b.QueuedMaxRequestBytes <= 0 || b.QueuedMaxRequestBytes >= int64(b.SocketRequestMaxBytes)},
		{"max.connections", b.MaxConnections >= 0},
		{"max.connections.per.ip", b.MaxConnectionsPerIP >= 1},
		{"log.segment.bytes", b.LogSegmentBytes >= 14},
		{"log.roll.ms", b.LogRollMs >= 1},
		{"log.index.interval.bytes", b.LogIndexIntervalBytes >= 0},
		{"log.flush.interval.messages", b.LogFlushIntervalMessages >= 1},
		{"log.retention.check.interval.ms", b.LogRetentionCheckIntervalMs >= 1},
		{"log.cleaner.min.cleanable.ratio", b.LogCleanerMinCleanableRatio >= 0 && b.LogCleanerMinCleanableRatio <= 1},
		{"log.cleaner.min.compaction.lag.ms", b.LogCleanerMinCompactionLagMs >= 0},
		{"log.cleaner.max.compaction.lag.ms", b.LogCleanerMaxCompactionLagMs >= 1},
		{"log.cleaner.io.max.bytes.per.second", b.LogCleanerIOMaxBytesPerSecond > 0},
		{"log.cleaner.dedupe.buffer.size", b.LogCleanerDedupeBufferSize >= 1<<20},
		{"log.cleaner.backoff.ms", b.LogCleanerBackoffMs >= 1},
		{"min.insync.replicas", b.MinInsyncReplicas >= 1},
		{"metadata.store", strings.TrimSpace(b.MetadataStore) != ""},
		{"offsets.topic.num.partitions", b.OffsetsTopicNumPartitions >= 1},
		{"offsets.retention.minutes", b.OffsetsRetentionMinutes >= 1},
		{"group.initial.rebalance.delay.ms", b.GroupInitialRebalanceDelayMs >= 0},
		{"group.min.session.timeout.ms", b.GroupMinSessionTimeoutMs >= 0 && b.GroupMinSessionTimeoutMs <= b.GroupMaxSessionTimeoutMs},
		{"group.consumer.heartbeat.interval.ms", b.GroupConsumerHeartbeatIntervalMs >= 1},
		{"group.consumer.session.timeout.ms", b.GroupConsumerSessionTimeoutMs >= 1},
		{"broker.session.timeout.ms", b.BrokerSessionTimeoutMs >= 1},
		{"broker.heartbeat.interval.ms", b.BrokerHeartbeatIntervalMs >= 1},
		{"replica.lag.time.max.ms", b.ReplicaLagTimeMaxMs >= 1},
		{"replica.fetch.wait.max.ms", b.ReplicaFetchWaitMaxMs >= 0},
		{"replica.fetch.max.bytes", b.ReplicaFetchMaxBytes >= 1},
		{"offsets.topic.replication.factor", b.OffsetsTopicReplicationFactor >= 1},
		{"transaction.state.log.num.partitions", b.TransactionStateLogNumPartitions >= 1},
		{"transaction.state.log.replication.factor", b.TransactionStateLogReplicationFactor >= 1},
		{"transaction.state.log.min.isr", b.TransactionStateLogMinIsr >= 1},
		{"transaction.state.log.segment.bytes", b.TransactionStateLogSegmentBytes >= 1024},
		{"transaction.max.timeout.ms", b.TransactionMaxTimeoutMs >= 1},
		{"log.message.timestamp.before.max.ms", b.LogMessageTimestampBeforeMaxMs >= 0},
		{"log.message.timestamp.after.max.ms", b.LogMessageTimestampAfterMaxMs >= 0},
		{"transaction.abort.timed.out.transaction.cleanup.interval.ms", b.TransactionAbortTimedOutTransactionCleanupIntervalMs >= 1},
		{"transactional.id.expiration.ms", b.TransactionalIDExpirationMs >= 1},
		{"transaction.remove.expired.transaction.cleanup.interval.ms", b.TransactionRemoveExpiredTransactionCleanupIntervalMs >= 1},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("config: %s: value out of range", c.key)
		}
	}
	if _, err := b.Roles(); err != nil {
		return err
	}
	if _, err := b.ConnectionOverrides(); err != nil {
		return err
	}
	for key, v := range map[string]string{
		"log.message.timestamp.type": b.LogMessageTimestampType,
		"log.cleanup.policy":         b.LogCleanupPolicy,
		"compression.type":           b.CompressionType,
	} {
		topicKey := map[string]string{
			"log.message.timestamp.type": "message.timestamp.type",
			"log.cleanup.policy":         "cleanup.policy",
			"compression.type":           "compression.type",
		}[key]
		if err := topicKeys[topicKey].check(v); err != nil {
			return fmt.Errorf("config: %s: %v", key, err)
		}
	}
	return nil
}

// Roles is what process.roles asks this process to be.
type Roles struct {
	Broker     bool // serves Kafka clients and hosts partition logs
	Controller bool // votes in the raft metadata quorum
}

// Roles parses process.roles: a comma-separated, non-empty subset of
// "broker" and "controller", in any order.
func (b Broker) Roles() (Roles, error) {
	var r Roles
	for _, part := range strings.Split(b.ProcessRoles, ",") {
		switch strings.TrimSpace(part) {
		case "broker":
			r.Broker = true
		case "controller":
			r.Controller = true
		default:
			return Roles{}, fmt.Errorf("config: process.roles %q: want broker, controller or broker,controller", b.ProcessRoles)
		}
	}
	return r, nil
}

// ConnectionOverrides parses max.connections.per.ip.overrides:
// comma-separated "IP:count" entries ("127.0.0.1:200,::1:50"; an IPv6
// address is split at its last colon and may be bracketed). Unlike Kafka,
// host names are not accepted: the broker does no DNS lookups for this.
func (b Broker) ConnectionOverrides() (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for _, e := range SplitList(b.MaxConnectionsPerIPOverrides) {
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("config: max.connections.per.ip.overrides: entry %q: want IP:count", e)
		}
		host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(e[:i]), "["), "]")
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("config: max.connections.per.ip.overrides: entry %q: %q is not an IP address", e, host)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(e[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("config: max.connections.per.ip.overrides: entry %q: the count must be an integer from 0 to 2147483647", e)
		}
		out[ip.Unmap()] = int(n)
	}
	return out, nil
}
