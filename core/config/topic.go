package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Type is a config value's type, numbered as DescribeConfigs v3+ reports it.
type Type int8

// Config types, as in Kafka's DescribeConfigsResponse ConfigType.
const (
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
	TypeLong    Type = 5
	TypeDouble  Type = 6
	TypeList    Type = 7
)

// Key describes one topic config: its type, the broker config that supplies
// its default, and what values it accepts.
type Key struct {
	Name      string
	Type      Type
	BrokerKey string
	Doc       string
	// brokerValue reads the default from the broker config.
	brokerValue func(Broker) string
	// allowed, when set, lists every accepted value (for lists: element).
	allowed []string
	min     int64
	maxOne  bool // TypeDouble: at most 1 (a ratio)
}

func (k Key) check(v string) error {
	switch k.Type {
	case TypeBoolean:
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not a boolean", v)
		}
	case TypeInt, TypeLong:
		bits := 64
		if k.Type == TypeInt {
			bits = 32
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return fmt.Errorf("%q is not a %d-bit integer", v, bits)
		}
		if n < k.min {
			return fmt.Errorf("%d is below the minimum %d", n, k.min)
		}
	case TypeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < float64(k.min) || (k.maxOne && f > 1) {
			return fmt.Errorf("%q is not a number in the allowed range", v)
		}
	case TypeList:
		for _, e := range strings.Split(v, ",") {
			if k.allowed != nil && !slices.Contains(k.allowed, strings.TrimSpace(e)) {
				return fmt.Errorf("%q is not one of %s", e, strings.Join(k.allowed, ", "))
			}
		}
	default:
		if k.allowed != nil && !slices.Contains(k.allowed, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(k.allowed, ", "))
		}
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

var topicKeys = map[string]Key{}

// topicKeyList is the table of topic configs Vltava supports. Values a
// later issue will honour (compaction, ISR) are accepted and reported now so
// that tools which set them keep working.
var topicKeyList = []Key{
	{Name: "cleanup.policy", Type: TypeList, BrokerKey: "log.cleanup.policy", allowed: []string{"delete", "compact"},
		Doc: "delete: drop old segments by retention; compact: keep the latest record per key", brokerValue: func(b Broker) string { return b.LogCleanupPolicy }},
	{Name: "segment.bytes", Type: TypeInt, BrokerKey: "log.segment.bytes", min: 14,
		Doc: "roll a new segment when the active one would exceed this size", brokerValue: func(b Broker) string { return itoa(b.LogSegmentBytes) }},
	{Name: "segment.ms", Type: TypeLong, BrokerKey: "log.roll.ms", min: 1,
		Doc: "roll a new segment when the active one is this old", brokerValue: func(b Broker) string { return itoa(b.LogRollMs) }},
	{Name: "retention.ms", Type: TypeLong, BrokerKey: "log.retention.ms", min: -1,
		Doc: "delete segments whose newest record is older than this; -1 keeps them", brokerValue: func(b Broker) string { return itoa(b.LogRetentionMs) }},
	{Name: "retention.bytes", Type: TypeLong, BrokerKey: "log.retention.bytes", min: -1,
		Doc: "delete the oldest segments while the partition is larger than this; -1 for no limit", brokerValue: func(b Broker) string { return itoa(b.LogRetentionBytes) }},
	{Name: "index.interval.bytes", Type: TypeInt, BrokerKey: "log.index.interval.bytes", min: 0,
		Doc: "bytes of log between offset index entries", brokerValue: func(b Broker) string { return itoa(int64(b.LogIndexIntervalBytes)) }},
	{Name: "flush.messages", Type: TypeLong, BrokerKey: "log.flush.interval.messages", min: 1,
		Doc: "fsync after this many records; 1 fsyncs every write before it is acknowledged", brokerValue: func(b Broker) string { return itoa(b.LogFlushIntervalMessages) }},
	{Name: "flush.ms", Type: TypeLong, BrokerKey: "log.flush.interval.ms", min: 0,
		Doc: "fsync data older than this", brokerValue: func(b Broker) string { return itoa(b.LogFlushIntervalMs) }},
	{Name: "max.message.bytes", Type: TypeInt, BrokerKey: "message.max.bytes", min: 0,
		Doc: "largest record batch accepted", brokerValue: func(b Broker) string { return itoa(int64(b.MessageMaxBytes)) }},
	{Name: "message.timestamp.type", Type: TypeString, BrokerKey: "log.message.timestamp.type", allowed: []string{"CreateTime", "LogAppendTime"},
		Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's", brokerValue: func(b Broker) string { return b.LogMessageTimestampType }},
	{Name: "message.timestamp.before.max.ms", Type: TypeLong, BrokerKey: "log.message.timestamp.before.max.ms", min: 0,
		Doc: "refuse CreateTime records more than this far before the broker's clock (INVALID_TIMESTAMP)", brokerValue: func(b Broker) string { return itoa(b.LogMessageTimestampBeforeMaxMs) }},
	{Name: "message.timestamp.after.max.ms", Type: TypeLong, BrokerKey: "log.message.timestamp.after.max.ms", min: 0,
		Doc: "refuse CreateTime records more than this far after the broker's clock (INVALID_TIMESTAMP)", brokerValue: func(b Broker) string { return itoa(b.LogMessageTimestampAfterMaxMs) }},
	{Name: "delete.retention.ms", Type: TypeLong, BrokerKey: "log.cleaner.delete.retention.ms", min: 0,
		Doc: "how long tombstones stay in compacted topics", brokerValue: func(b Broker) string { return itoa(b.LogCleanerDeleteRetentionMs) }},
	{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, BrokerKey: "log.cleaner.min.cleanable.ratio", min: 0, maxOne: true,
		Doc: "compact once this fraction of the compactable bytes is dirty", brokerValue: func(b Broker) string { return strconv.FormatFloat(b.LogCleanerMinCleanableRatio, 'g', -1, 64) }},
	{Name: "min.compaction.lag.ms", Type: TypeLong, BrokerKey: "log.cleaner.min.compaction.lag.ms", min: 0,
		Doc: "records stay uncompacted at least this long", brokerValue: func(b Broker) string { return itoa(b.LogCleanerMinCompactionLagMs) }},
	{Name: "max.compaction.lag.ms", Type: TypeLong, BrokerKey: "log.cleaner.max.compaction.lag.ms", min: 1,
		Doc: "compact dirty records older than this regardless of the dirty ratio", brokerValue: func(b Broker) string { return itoa(b.LogCleanerMaxCompactionLagMs) }},
	{Name: "min.insync.replicas", Type: TypeInt, BrokerKey: "min.insync.replicas", min: 1,
		Doc: "replicas that must have an acks=all write", brokerValue: func(b Broker) string { return itoa(int64(b.MinInsyncReplicas)) }},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, BrokerKey: "unclean.leader.election.enable",
		Doc: "allow an out-of-sync replica to become leader", brokerValue: func(b Broker) string { return strconv.FormatBool(b.UncleanLeaderElectionEnable) }},
	// A codec other than "producer" makes the leader re-encode every
	// produced batch that is not already in it (core/record.Recompress).
	{Name: "compression.type", Type: TypeString, BrokerKey: "compression.type", allowed: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"},
		Doc: "producer: keep the producer's compression; uncompressed, gzip, snappy, lz4, zstd: store every batch so", brokerValue: func(b Broker) string { return b.CompressionType }},
}

func init() {
	for _, k := range topicKeyList {
		topicKeys[k.Name] = k
	}
}

// TopicKeys lists the supported topic configs in a stable order.
func TopicKeys() []Key { return slices.Clone(topicKeyList) }

// LookupTopicKey finds a topic config by name.
func LookupTopicKey(name string) (Key, bool) {
	k, ok := topicKeys[name]
	return k, ok
}

// BrokerDefault is the key's value as the broker config sets it.
func (k Key) BrokerDefault(b Broker) string { return k.brokerValue(b) }

// CheckTopicValue validates a topic config override. The error names the key.
func CheckTopicValue(name, value string) error {
	k, ok := topicKeys[name]
	if !ok {
		return fmt.Errorf("config: unknown topic config %q", name)
	}
	if err := k.check(value); err != nil {
		return fmt.Errorf("config: %s: %v", name, err)
	}
	return nil
}

// Topic is a topic's effective configuration: the broker's defaults with
// the topic's overrides applied.
type Topic struct {
	CleanupPolicy               []string
	SegmentBytes                int64
	SegmentMs                   int64
	RetentionMs                 int64
	RetentionBytes              int64
	IndexIntervalBytes          int32
	FlushMessages               int64
	FlushMs                     int64
	MaxMessageBytes             int32
	LogAppendTime               bool
	TimestampBeforeMaxMs        int64 // message.timestamp.before.max.ms
	TimestampAfterMaxMs         int64 // message.timestamp.after.max.ms
	DeleteRetentionMs           int64
	MinCleanableDirtyRatio      float64
	MinCompactionLagMs          int64
	MaxCompactionLagMs          int64
	MinInsyncReplicas           int32
	UncleanLeaderElectionEnable bool
	CompressionType             string // compression.type: producer or a codec's name
}

// ResolveTopic computes a topic's effective config. Overrides must have
// passed CheckTopicValue; an invalid one is an error naming the key.
func ResolveTopic(b Broker, overrides map[string]string) (Topic, error) {
	val := func(name string) string {
		if v, ok := overrides[name]; ok {
			return v
		}
		return topicKeys[name].brokerValue(b)
	}
	for name, v := range overrides {
		if err := CheckTopicValue(name, v); err != nil {
			return Topic{}, err
		}
	}
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(val(name), 10, 64) // checked above or a validated broker value
		return n
	}
	ratio, _ := strconv.ParseFloat(val("min.cleanable.dirty.ratio"), 64) // checked above or a validated broker value
	var policies []string
	for _, p := range strings.Split(val("cleanup.policy"), ",") {
		policies = append(policies, strings.TrimSpace(p))
	}
	return Topic{
		CleanupPolicy:               policies,
		SegmentBytes:                num("segment.bytes"),
		SegmentMs:                   num("segment.ms"),
		RetentionMs:                 num("retention.ms"),
		RetentionBytes:              num("retention.bytes"),
		IndexIntervalBytes:          int32(num("index.interval.bytes")),
		FlushMessages:               num("flush.messages"),
		FlushMs:                     num("flush.ms"),
		MaxMessageBytes:             int32(num("max.message.bytes")),
		LogAppendTime:               val("message.timestamp.type") == "LogAppendTime",
		TimestampBeforeMaxMs:        num("message.timestamp.before.max.ms"),
		TimestampAfterMaxMs:         num("message.timestamp.after.max.ms"),
		DeleteRetentionMs:           num("delete.retention.ms"),
		MinCleanableDirtyRatio:      ratio,
		MinCompactionLagMs:          num("min.compaction.lag.ms"),
		MaxCompactionLagMs:          num("max.compaction.lag.ms"),
		MinInsyncReplicas:           int32(num("min.insync.replicas")),
		UncleanLeaderElectionEnable: val("unclean.leader.election.enable") == "true",
		CompressionType:             val("compression.type"),
	}, nil
}

// Deletes reports whether retention deletes old segments ("delete" policy).
func (t Topic) Deletes() bool { return slices.Contains(t.CleanupPolicy, "delete") }

// Compacts reports whether the log cleaner compacts the topic ("compact" policy).
func (t Topic) Compacts() bool { return slices.Contains(t.CleanupPolicy, "compact") }
