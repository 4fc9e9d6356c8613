package broker

import (
	"time"

	"github.com/vltava/vltava/core/log"
)

// cleaner is the broker's log cleaner: one log.Cleaner goroutine that
// compacts every partition whose topic has cleanup.policy compact.
type cleaner = log.Cleaner

// startCleaner starts the log cleaner unless log.cleaner.enable is false.
func (b *Broker) startCleaner() {
	if !b.cfg.LogCleanerEnable {
		return
	}
	b.cleaner = log.NewCleaner(log.CleanerConfig{
		IOMaxBytesPerSecond: b.cfg.LogCleanerIOMaxBytesPerSecond,
		DedupeBufferSize:    b.cfg.LogCleanerDedupeBufferSize,
		Backoff:             time.Duration(b.cfg.LogCleanerBackoffMs) * time.Millisecond,
		Logger:              b.logger,
	}, b.compactedLogs)
	b.cleaner.Start()
}

// stopCleaner stops the cleaner and waits for it, before logs close.
func (b *Broker) stopCleaner() {
	if b.cleaner != nil {
		b.cleaner.Close()
	}
}

// compactedLogs lists the logs of partitions whose topic compacts.
func (b *Broker) compactedLogs() []*log.Log {
	var out []*log.Log
	for _, p := range b.meta.Load().allPartitions() {
		if p.Config().Compacts() {
			out = append(out, p.log)
		}
	}
	return out
}
