package host

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
)

// lineWriter turns a plugin's output into log records, one per line.
type lineWriter struct {
	logger *slog.Logger

	mu  sync.Mutex
	buf []byte
}

// maxLine bounds a buffered partial line; longer lines are logged in
// pieces.
const maxLine = 64 << 10

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxLine {
				w.logLine(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.logLine(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// logLine logs one line: a JSON object with @message (hclog's shape, which
// plugins/sdk/serve's slog handler writes) keeps its level and fields;
// anything else is logged as text at Info.
func (w *lineWriter) logLine(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var entry map[string]any
	if line[0] == '{' && json.Unmarshal(line, &entry) == nil {
		if msg, ok := entry["@message"].(string); ok {
			level := parseLevel(entry["@level"])
			keys := make([]string, 0, len(entry))
			for k := range entry {
				if len(k) == 0 || k[0] != '@' {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			attrs := make([]slog.Attr, 0, len(keys))
			for _, k := range keys {
				attrs = append(attrs, slog.Any(k, entry[k]))
			}
			w.logger.LogAttrs(context.Background(), level, msg, attrs...)
			return
		}
	}
	w.logger.Info(string(line))
}

func parseLevel(v any) slog.Level {
	s, _ := v.(string)
	switch s {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
