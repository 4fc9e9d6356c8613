package broker

import (
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/quota"
)

// PartitionStat is one partition's figures as this broker sees them, for
// monitoring (daemon/metrics). Replica counts come from the controller's
// last published view; offsets and sizes from the local log.
type PartitionStat struct {
	Topic     string
	Partition int32
	// Leader: this broker leads the partition. The leader is the one
	// replica whose ISR and high watermark are current, so a cluster-wide
	// figure sums the leaders' series only (as Kafka's do).
	Leader bool
	// Offline: the controller's view has no leader for it.
	Offline                 bool
	Replicas, ISR, MinISR   int
	LogStart, HighWatermark int64
	LogEnd, SizeBytes       int64
	Segments                int
	// Traffic since the broker started: bytes and records appended by
	// producers (replicated appends not counted), bytes sent to consumers,
	// and bytes sent to followers.
	BytesIn, RecordsIn, BytesOut, ReplicationBytesOut int64
}

// traffic counts a partition's produce and fetch traffic with atomics
// (one add per produced batch and per fetched partition).
type traffic struct {
	bytesIn, recordsIn, bytesOut, replBytesOut atomic.Int64
}

func (t *traffic) in(bytes int, records int32) {
	t.bytesIn.Add(int64(bytes))
	t.recordsIn.Add(int64(records))
}

func (t *traffic) out(bytes int64, replica bool) {
	if replica {
		t.replBytesOut.Add(bytes)
	} else {
		t.bytesOut.Add(bytes)
	}
}

// PartitionStats returns a figure set for every partition this broker
// holds a replica of, in topic order. It takes no broker-wide lock: each
// figure is read on its own, so a set may straddle a concurrent append.
func (b *Broker) PartitionStats() []PartitionStat {
	snap := b.meta.Load()
	var out []PartitionStat
	for _, name := range snap.names() {
		t := snap.byName[name]
		for _, p := range t.partitions {
			if p == nil {
				continue
			}
			st := PartitionStat{
				Topic:         t.name,
				Partition:     p.index,
				Leader:        p.IsLeader(),
				MinISR:        int(t.cfg.MinInsyncReplicas),
				LogStart:      p.log.StartOffset(),
				HighWatermark: p.HighWatermark(),
				LogEnd:        p.log.EndOffset(),
				SizeBytes:     p.log.Size(),
				Segments:      p.log.Segments(),

				BytesIn:             p.traffic.bytesIn.Load(),
				RecordsIn:           p.traffic.recordsIn.Load(),
				BytesOut:            p.traffic.bytesOut.Load(),
				ReplicationBytesOut: p.traffic.replBytesOut.Load(),
			}
			v := p.State().View
			st.Offline = v.Leader < 0
			st.Replicas, st.ISR = len(v.Replicas), len(v.ISR)
			out = append(out, st)
		}
	}
	return out
}

// NodeID is this broker's node.id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// IsController reports whether this broker is the cluster's active
// controller.
func (b *Broker) IsController() bool { return b.controllerID() == b.cfg.NodeID }

// LogDirs lists the broker's log directories (log.dirs).
func (b *Broker) LogDirs() []string { return config.SplitList(b.cfg.LogDirs) }

// QuotaSensors returns the measured rate and total throttle of every
// client quota entity active recently.
func (b *Broker) QuotaSensors() []quota.Throttled { return b.quotas.Sensors(time.Now()) }

// ISRChanges returns how many times this broker, as leader, shrank and
// expanded a partition's ISR since it started.
func (b *Broker) ISRChanges() (shrinks, expands int64) {
	return b.isrShrinks.Load(), b.isrExpands.Load()
}

// Elections returns the clean and unclean leader elections this broker
// made as the cluster's controller.
func (b *Broker) Elections() (clean, unclean int64) {
	if b.cl == nil || b.cl.node == nil {
		return 0, 0
	}
	return b.cl.node.Elections()
}

// StoreSession reports whether the broker holds its metadata-store
// session and is not fenced (able to lead).
func (b *Broker) StoreSession() (live, fenced bool) {
	if b.cl == nil || b.cl.node == nil {
		return false, false
	}
	return b.cl.node.SessionLive(), b.cl.node.Fenced()
}
