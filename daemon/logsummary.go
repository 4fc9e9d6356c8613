package main

import (
	"context"
	"log/slog"
	"sync"
)

// recoveredSegmentMsg is the line core/log writes for each segment it
// checks when a log was not closed cleanly (after kill -9): one per
// partition at least, fifty for an empty __consumer_offsets alone.
const recoveredSegmentMsg = "log: recovered segment"

// summaryHandler wraps the daemon's log handler and folds the per-segment
// recovery lines into counts, each line going on at debug level; summary
// then writes one line for them all.
type summaryHandler struct {
	slog.Handler
	st *recoveryStats // shared by the handlers WithAttrs and WithGroup derive
}

type recoveryStats struct {
	mu         sync.Mutex
	segments   int
	nonEmpty   int
	bytes      int64
	validated  int64 // bytes checked: from the recovery point on
	partitions map[string]bool
}

func newSummaryHandler(h slog.Handler) *summaryHandler {
	return &summaryHandler{Handler: h, st: &recoveryStats{partitions: map[string]bool{}}}
}

// Handle implements slog.Handler.
func (h *summaryHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != recoveredSegmentMsg || r.Level != slog.LevelInfo {
		return h.Handler.Handle(ctx, r)
	}
	h.st.mu.Lock()
	h.st.segments++
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "dir":
			h.st.partitions[a.Value.String()] = true
		case "bytes":
			if n := a.Value.Int64(); a.Value.Kind() == slog.KindInt64 && n > 0 {
				h.st.bytes += n
				h.st.nonEmpty++
			}
		case "validated_bytes":
			if a.Value.Kind() == slog.KindInt64 {
				h.st.validated += a.Value.Int64()
			}
		}
		return true
	})
	h.st.mu.Unlock()
	if !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *summaryHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &summaryHandler{Handler: h.Handler.WithAttrs(attrs), st: h.st}
}

// WithGroup implements slog.Handler.
func (h *summaryHandler) WithGroup(name string) slog.Handler {
	return &summaryHandler{Handler: h.Handler.WithGroup(name), st: h.st}
}

// summary logs one line for the segments recovered since the last call,
// if any.
func (h *summaryHandler) summary(logger *slog.Logger) {
	h.st.mu.Lock()
	segments, nonEmpty, bytes, validated, partitions := h.st.segments, h.st.nonEmpty, h.st.bytes, h.st.validated, len(h.st.partitions)
	h.st.segments, h.st.nonEmpty, h.st.bytes, h.st.validated = 0, 0, 0, 0
	clear(h.st.partitions)
	h.st.mu.Unlock()
	if segments == 0 {
		return
	}
	logger.Info("log: recovered the logs after an unclean shutdown", "partitions", partitions,
		"segments", segments, "non_empty_segments", nonEmpty, "bytes", bytes, "validated_bytes", validated)
}
