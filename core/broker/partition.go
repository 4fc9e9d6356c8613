package broker

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/log"
)

// partition is one partition this broker leads. On a single broker it is
// the only replica, so the high watermark follows the log end offset as
// soon as an append returns (after its fsync, when flush.messages=1).
//
// INVARIANT: hw only grows while the log is not truncated, and
// hw <= log.EndOffset().
type partition struct {
	topic string
	index int32
	log   *log.Log
	cfg   atomic.Pointer[config.Topic]

	leaderEpoch atomic.Int32
	hw          atomic.Int64

	hwMu sync.Mutex
	hwCh chan struct{} // closed when hw next advances; guarded by hwMu

	// repl is the partition's replication role and state. In cluster
	// mode (clustered) the high watermark follows the ISR (see
	// replication.go), not the log end.
	repl      replState
	clustered bool
	// leader tracks followers while this broker leads the partition in
	// cluster mode; guarded by repl.roleMu for writes, read through
	// leaderState.
	leader atomic.Pointer[leaderTracker]

	traffic traffic // bytes and records in and out, for monitoring (stats.go)
}

func newPartition(topic string, index int32, l *log.Log, cfg config.Topic) *partition {
	p := &partition{topic: topic, index: index, log: l, hwCh: make(chan struct{})}
	p.cfg.Store(&cfg)
	p.hw.Store(l.EndOffset())
	return p
}

func (p *partition) String() string { return p.topic + "-" + strconv.Itoa(int(p.index)) }

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

// highWatermark is the offset below which records are committed and
// visible to consumers.
func (p *partition) highWatermark() int64 { return p.hw.Load() }

// hwChanged returns a channel closed the next time the high watermark
// advances.
func (p *partition) hwChanged() <-chan struct{} {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	return p.hwCh
}

// advanceHW raises the high watermark to hw if it is higher and wakes
// waiting fetches.
func (p *partition) advanceHW(hw int64) {
	for {
		cur := p.hw.Load()
		if hw <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, hw) {
			break
		}
	}
	p.hwMu.Lock()
	close(p.hwCh)
	p.hwCh = make(chan struct{})
	p.hwMu.Unlock()
}

// append writes one batch that record.Validate accepted and advances the
// high watermark.
func (p *partition) append(batch []byte, now time.Time) (log.AppendResult, error) {
	cfg := p.cfg.Load()
	opts := log.AppendOptions{LeaderEpoch: p.leaderEpoch.Load(), CRCChecked: true}
	if cfg.LogAppendTime {
		opts.LogAppendTime = now.UnixMilli()
	}
	res, err := p.log.Append(batch, opts)
	if err != nil {
		return res, err
	}
	if p.clustered {
		p.leaderAppended(now)
		return res, nil
	}
	p.advanceHW(p.log.EndOffset())
	return res, nil
}

// resetHW sets the high watermark after the log moved backwards or its
// start moved past it (DeleteRecords, truncation).
func (p *partition) resetHW() {
	end := p.log.EndOffset()
	if p.hw.Load() > end {
		p.hw.Store(end)
		p.wake()
	}
	if p.clustered {
		p.leaderAppended(time.Now()) // a leader's HW follows the ISR, not the log end
		return
	}
	p.advanceHW(end)
}

// setConfig applies a new topic config to the partition and its log.
func (p *partition) setConfig(cfg config.Topic) {
	p.cfg.Store(&cfg)
	p.log.SetConfig(logConfig(cfg))
}
