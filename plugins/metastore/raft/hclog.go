package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogLogger is the logger type hashicorp/raft takes.
type hclogLogger = hclog.Logger

// newHCLogger adapts a slog.Logger for hashicorp/raft: an intercept
// logger whose own output is discarded and whose sink forwards every
// line to slog at the matching level.
func newHCLogger(log *slog.Logger) hclog.Logger {
	level := hclog.Info
	if log.Enabled(context.Background(), slog.LevelDebug) {
		level = hclog.Debug
	}
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: level, Output: io.Discard})
	l.RegisterSink(slogSink{log: log})
	return l
}

type slogSink struct{ log *slog.Logger }

// Accept implements hclog.SinkAdapter.
func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	var lvl slog.Level
	switch {
	case level <= hclog.Debug:
		lvl = slog.LevelDebug
	case level == hclog.Info:
		lvl = slog.LevelInfo
	case level == hclog.Warn:
		lvl = slog.LevelWarn
	default:
		lvl = slog.LevelError
	}
	switch {
	case lvl >= slog.LevelWarn && argContains(args, "use of closed network connection"):
		// The transport's accept and read loops end with "use of closed
		// network connection" on every clean shutdown: no news.
		lvl = slog.LevelDebug
	case lvl >= slog.LevelWarn && argContains(args, "transport shutdown"):
		// This node's own transport closing under a request being read:
		// its clean shutdown, no news either.
		lvl = slog.LevelDebug
	case lvl == slog.LevelError && (argContains(args, "connection refused") || argContains(args, "connection reset by peer") || argIsEOF(args)):
		// A peer that is down (stopped, restarting, killed) or closed (or
		// reset) the connection as it stopped: worth a warning, and hashicorp/raft
		// repeats it with a backoff. Peers stopped together (cluster up's
		// Ctrl-C) see each other's connections end this way.
		lvl = slog.LevelWarn
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, lvl) {
		return
	}
	attrs := []any{"module", name}
	for i := 0; i+1 < len(args); i += 2 {
		attrs = append(attrs, fmt.Sprint(args[i]), args[i+1])
	}
	s.log.Log(ctx, lvl, "hashicorp/raft: "+msg, attrs...)
}

// argIsEOF reports whether one of a raft log line's values is the error
// io.EOF: the peer closed the connection.
func argIsEOF(args []any) bool {
	for i := 1; i < len(args); i += 2 {
		if err, ok := args[i].(error); ok && errors.Is(err, io.EOF) {
			return true
		}
	}
	return false
}

// argContains reports whether one of a raft log line's values (an error
// or a string) contains text.
func argContains(args []any, text string) bool {
	for i := 1; i < len(args); i += 2 {
		switch v := args[i].(type) {
		case error:
			if strings.Contains(v.Error(), text) {
				return true
			}
		case string:
			if strings.Contains(v, text) {
				return true
			}
		}
	}
	return false
}
