package broker

import (
	"fmt"
	"slices"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/log"
	part "github.com/vltava/vltava/core/partition"
)

// partition is one partition on this broker: its replication state
// (core/partition: role, leader epoch, ISR, high watermark, the leader/ISR
// lock) and the broker's bookkeeping around it. topic, index and log are
// the embedded Partition's, kept as fields for the handlers.
type partition struct {
	*part.Partition
	topic string
	index int32
	log   *log.Log

	// followAddr is the leader address the fetchers were given ("" when
	// not following); guarded by the partition's transition lock.
	followAddr string

	traffic traffic // bytes and records in and out, for monitoring (stats.go)
}

func newPartition(topic string, index int32, l *log.Log, cfg config.Topic) *partition {
	return &partition{Partition: part.New(topic, index, l, cfg), topic: topic, index: index, log: l}
}

// dirName is the partition's directory name under log.dirs.
func dirName(topic string, index int32) string { return fmt.Sprintf("%s-%d", topic, index) }

func logConfig(t config.Topic) log.Config {
	return log.Config{
		SegmentBytes:       t.SegmentBytes,
		SegmentMs:          t.SegmentMs,
		RetentionMs:        retentionMs(t),
		RetentionBytes:     retentionBytes(t),
		IndexIntervalBytes: t.IndexIntervalBytes,
		FlushMessages:      t.FlushMessages,
		FlushMs:            t.FlushMs,

		Compact:                t.Compacts(),
		DeleteRetentionMs:      t.DeleteRetentionMs,
		MinCleanableDirtyRatio: t.MinCleanableDirtyRatio,
		MinCompactionLagMs:     t.MinCompactionLagMs,
		MaxCompactionLagMs:     t.MaxCompactionLagMs,
	}
}

// As in Kafka, compact-only topics have no retention (the cleaner bounds
// them); retention applies only with the delete policy, so compact,delete
// gets both.
func retentionMs(t config.Topic) int64 {
	if !t.Deletes() {
		return -1
	}
	return t.RetentionMs
}

func retentionBytes(t config.Topic) int64 {
	if !t.Deletes() {
		return -1
	}
	return t.RetentionBytes
}

// setConfig applies a new topic config to the partition and its log.
func (p *partition) setConfig(cfg config.Topic) { p.SetConfig(cfg, logConfig(cfg)) }

// sameInts reports whether two replica lists hold the same IDs in the same
// order.
func sameInts(a, b []int32) bool { return slices.Equal(a, b) }
