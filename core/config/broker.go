// Package config holds Vltava's typed configuration: the broker's settings,
// named after Kafka's broker config keys, and the per-topic settings with
// the broker keys that supply their defaults.
package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
)

// Broker is a broker's configuration. The mapstructure tags are Kafka's
// broker config names; a config file uses exactly these keys.
type Broker struct {
	NodeID              int32  `mapstructure:"node.id"`
	Listeners           string `mapstructure:"listeners"`            // host:port or PLAINTEXT://host:port
	AdvertisedListeners string `mapstructure:"advertised.listeners"` // empty: same as listeners
	LogDirs             string `mapstructure:"log.dirs"`             // data directory
	ClusterID           string `mapstructure:"cluster.id"`           // empty: generated once and kept in the data dir
	BrokerRack          string `mapstructure:"broker.rack"`

	NumPartitions            int32 `mapstructure:"num.partitions"`
	DefaultReplicationFactor int16 `mapstructure:"default.replication.factor"`
	AutoCreateTopicsEnable   bool  `mapstructure:"auto.create.topics.enable"`
	DeleteTopicEnable        bool  `mapstructure:"delete.topic.enable"`

	MessageMaxBytes       int32 `mapstructure:"message.max.bytes"`
	SocketRequestMaxBytes int32 `mapstructure:"socket.request.max.bytes"`
	ConnectionsMaxIdleMs  int64 `mapstructure:"connections.max.idle.ms"`
	// ZeroCopy sends fetched records with sendfile on plaintext listeners.
	// It has no Kafka counterpart; turning it off exists for measurement.
	ZeroCopy bool `mapstructure:"zero.copy.enable"`

	LogSegmentBytes             int64  `mapstructure:"log.segment.bytes"`
	LogRollMs                   int64  `mapstructure:"log.roll.ms"`
	LogRetentionMs              int64  `mapstructure:"log.retention.ms"`
	LogRetentionBytes           int64  `mapstructure:"log.retention.bytes"`
	LogIndexIntervalBytes       int32  `mapstructure:"log.index.interval.bytes"`
	LogFlushIntervalMessages    int64  `mapstructure:"log.flush.interval.messages"`
	LogFlushIntervalMs          int64  `mapstructure:"log.flush.interval.ms"`
	LogRetentionCheckIntervalMs int64  `mapstructure:"log.retention.check.interval.ms"`
	LogMessageTimestampType     string `mapstructure:"log.message.timestamp.type"`
	LogCleanupPolicy            string `mapstructure:"log.cleanup.policy"`
	LogCleanerDeleteRetentionMs int64  `mapstructure:"log.cleaner.delete.retention.ms"`
	MinInsyncReplicas           int32  `mapstructure:"min.insync.replicas"`
	UncleanLeaderElectionEnable bool   `mapstructure:"unclean.leader.election.enable"`
	CompressionType             string `mapstructure:"compression.type"`
}

// DefaultBroker returns Kafka's defaults, with Vltava's single-node
// choices: listen on 127.0.0.1:9092, data in ./data, topics auto-created.
func DefaultBroker() Broker {
	return Broker{
		NodeID:                      1,
		Listeners:                   "127.0.0.1:9092",
		LogDirs:                     "./data",
		NumPartitions:               1,
		DefaultReplicationFactor:    1,
		AutoCreateTopicsEnable:      true,
		DeleteTopicEnable:           true,
		MessageMaxBytes:             1048588,
		SocketRequestMaxBytes:       100 * 1024 * 1024,
		ConnectionsMaxIdleMs:        600000,
		ZeroCopy:                    true,
		LogSegmentBytes:             1 << 30,
		LogRollMs:                   7 * 24 * 3600 * 1000,
		LogRetentionMs:              7 * 24 * 3600 * 1000,
		LogRetentionBytes:           -1,
		LogIndexIntervalBytes:       4096,
		LogFlushIntervalMessages:    math.MaxInt64,
		LogFlushIntervalMs:          math.MaxInt64,
		LogRetentionCheckIntervalMs: 300000,
		LogMessageTimestampType:     "CreateTime",
		LogCleanupPolicy:            "delete",
		LogCleanerDeleteRetentionMs: 86400000,
		MinInsyncReplicas:           1,
		CompressionType:             "producer",
	}
}

// ListenAddr is the host:port of the first listener.
func (b Broker) ListenAddr() (string, error) { return firstListener(b.Listeners) }

// AdvertisedAddr is the host and port clients are told to connect to.
func (b Broker) AdvertisedAddr() (host string, port int32, err error) {
	l := b.AdvertisedListeners
	if l == "" {
		l = b.Listeners
	}
	addr, err := firstListener(l)
	if err != nil {
		return "", 0, err
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("config: advertised listener %q: %w", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("config: advertised listener %q: bad port", addr)
	}
	return h, int32(n), nil
}

func firstListener(s string) (string, error) {
	first := strings.TrimSpace(strings.Split(s, ",")[0])
	if name, addr, ok := strings.Cut(first, "://"); ok {
		if !strings.EqualFold(name, "PLAINTEXT") {
			return "", fmt.Errorf("config: listener %q: only PLAINTEXT is supported so far", first)
		}
		first = addr
	}
	if _, _, err := net.SplitHostPort(first); err != nil {
		return "", fmt.Errorf("config: listener %q: %w", first, err)
	}
	return first, nil
}

// Validate reports the first setting that cannot work, naming its key.
func (b Broker) Validate() error {
	if _, err := b.ListenAddr(); err != nil {
		return err
	}
	if _, _, err := b.AdvertisedAddr(); err != nil {
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
		{"log.segment.bytes", b.LogSegmentBytes >= 14},
		{"log.roll.ms", b.LogRollMs >= 1},
		{"log.index.interval.bytes", b.LogIndexIntervalBytes >= 0},
		{"log.flush.interval.messages", b.LogFlushIntervalMessages >= 1},
		{"log.retention.check.interval.ms", b.LogRetentionCheckIntervalMs >= 1},
		{"min.insync.replicas", b.MinInsyncReplicas >= 1},
	}
	for _, c := range checks {
		if !c.ok {
			return fmt.Errorf("config: %s: value out of range", c.key)
		}
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
