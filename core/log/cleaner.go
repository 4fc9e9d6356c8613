package log

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Throttle limits a byte rate, as Kafka's
// log.cleaner.io.max.bytes.per.second does for the cleaner. A nil
// *Throttle does not limit. It is safe for concurrent use.
type Throttle struct {
	rate float64 // bytes per second

	mu    sync.Mutex
	start time.Time
	bytes float64
}

// NewThrottle returns a Throttle allowing bytesPerSec; <= 0 means no limit
// (nil).
func NewThrottle(bytesPerSec float64) *Throttle {
	if bytesPerSec <= 0 {
		return nil
	}
	return &Throttle{rate: bytesPerSec}
}

// Wait accounts n bytes and sleeps until the rate allows them. It returns
// ctx's error if ctx ends first.
func (t *Throttle) Wait(ctx context.Context, n int) error {
	if t == nil {
		return ctx.Err()
	}
	t.mu.Lock()
	now := time.Now()
	elapsed := now.Sub(t.start).Seconds()
	if t.start.IsZero() || (elapsed > 1 && t.bytes <= elapsed*t.rate) {
		// A new window: idle time earns no burst beyond one second.
		t.start, t.bytes, elapsed = now, 0, 0
	}
	t.bytes += float64(n)
	ahead := t.bytes/t.rate - elapsed
	t.mu.Unlock()
	if ahead <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(time.Duration(ahead * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// CleanerConfig configures a Cleaner, with Kafka's broker config names.
type CleanerConfig struct {
	IOMaxBytesPerSecond float64       // log.cleaner.io.max.bytes.per.second; <= 0 unlimited
	DedupeBufferSize    int64         // log.cleaner.dedupe.buffer.size: bytes of key map per pass; <= 0 about 40 MiB
	Backoff             time.Duration // log.cleaner.backoff.ms: sleep between rounds; <= 0 15 s
	Logger              *slog.Logger
}

// bytesPerKey is what one key map entry costs: a 16-byte digest, an
// 8-byte offset and the Go map's overhead.
const bytesPerKey = 40

// Cleaner compacts logs in the background: one goroutine visits every log
// its owner lists, runs Clean on those that are due, then sleeps for the
// backoff or until Wake. Passes share one I/O throttle.
type Cleaner struct {
	cfg      CleanerConfig
	logs     func() []*Log
	throttle *Throttle

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// NewCleaner returns a Cleaner over the logs that logs returns each round
// (logs without cleanup.policy compact are skipped). Start runs it.
func NewCleaner(cfg CleanerConfig, logs func() []*Log) *Cleaner {
	if cfg.Backoff <= 0 {
		cfg.Backoff = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Cleaner{cfg: cfg, logs: logs, throttle: NewThrottle(cfg.IOMaxBytesPerSecond), wake: make(chan struct{}, 1)}
}

// Start starts the cleaner goroutine; Close stops it.
func (c *Cleaner) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		c.run(ctx)
	}()
}

// Wake starts a round now instead of after the backoff.
func (c *Cleaner) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close stops the cleaner, interrupting a pass, and waits for it. A pass
// interrupted before its swap leaves only a .cleaned file, removed at the
// next Open.
func (c *Cleaner) Close() {
	c.once.Do(func() {
		if c.cancel != nil {
			c.cancel()
			<-c.done
		}
	})
}

func (c *Cleaner) run(ctx context.Context) {
	t := time.NewTimer(c.cfg.Backoff)
	defer t.Stop()
	for {
		c.round(ctx)
		t.Reset(c.cfg.Backoff)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-t.C:
		}
	}
}

// round runs one pass over every compacted log.
func (c *Cleaner) round(ctx context.Context) {
	keys := DefaultCleanerKeys
	if c.cfg.DedupeBufferSize > 0 {
		keys = max(int(c.cfg.DedupeBufferSize/bytesPerKey), 1)
	}
	for _, l := range c.logs() {
		if ctx.Err() != nil {
			return
		}
		if !l.config().Compact {
			continue
		}
		st, err := l.Clean(ctx, time.Now(), CleanOptions{MaxKeys: keys, Throttle: c.throttle})
		switch {
		case err == nil && st.Segments > 0:
			c.cfg.Logger.Info("log: cleaned", "dir", l.Dir(), "segments", st.Segments,
				"read", st.BytesRead, "written", st.BytesWritten, "records", st.RecordsRead, "kept", st.RecordsKept)
		case err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled):
			c.cfg.Logger.Warn("log: cleaning failed", "dir", l.Dir(), "err", err)
		}
	}
}
