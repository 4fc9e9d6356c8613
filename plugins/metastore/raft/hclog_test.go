package raft

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestClosedConnectionIsNoError: hashicorp/raft's transport reports "use
// of closed network connection" at error level on every clean shutdown;
// it reaches the broker's log at debug level, other errors stay errors.
func TestClosedConnectionIsNoError(t *testing.T) {
	var buf bytes.Buffer
	sink := slogSink{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	closed := &net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}
	sink.Accept("raft-net", hclog.Error, "failed to accept connection", "error", closed)
	sink.Accept("raft-net", hclog.Error, "failed to decode incoming command", "error", fmt.Sprint(closed))
	if buf.Len() != 0 {
		t.Errorf("closed-connection errors logged at info or above:\n%s", buf.String())
	}
	sink.Accept("raft", hclog.Error, "failed to heartbeat to", "error", "dial tcp 127.0.0.1:1: connect: connection refused")
	if got := buf.String(); !strings.Contains(got, "level=WARN") || strings.Contains(got, "level=ERROR") {
		t.Errorf("an unreachable peer: %q, want a warning", got)
	}
	buf.Reset()
	// Its own transport shutting down under a read: no news; a peer that
	// closed the connection as it stopped: a warning.
	sink.Accept("raft-net", hclog.Error, "failed to decode incoming command", "error", "transport shutdown")
	if buf.Len() != 0 {
		t.Errorf("the transport's own shutdown logged at info or above:\n%s", buf.String())
	}
	sink.Accept("raft", hclog.Error, "failed to heartbeat to", "error", io.EOF)
	if got := buf.String(); !strings.Contains(got, "level=WARN") || strings.Contains(got, "level=ERROR") {
		t.Errorf("a peer closing its connection: %q, want a warning", got)
	}
	buf.Reset()
	sink.Accept("raft-net", hclog.Error, "failed to decode incoming command", "error", "read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer")
	if got := buf.String(); !strings.Contains(got, "level=WARN") || strings.Contains(got, "level=ERROR") {
		t.Errorf("a peer resetting its connection as it stopped: %q, want a warning", got)
	}
	buf.Reset()
	sink.Accept("raft", hclog.Error, "failed to appendEntries", "error", "disk full")
	if !strings.Contains(buf.String(), "level=ERROR") {
		t.Errorf("a real error was not logged as one: %q", buf.String())
	}
}
