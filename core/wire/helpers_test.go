package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlerFunc adapts a function to Handler.
type handlerFunc func(ctx context.Context, req *Request) (*Response, error)

func (f handlerFunc) Handle(ctx context.Context, req *Request) (*Response, error) { return f(ctx, req) }

// logSink collects log output safely across goroutines.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor polls cond until it holds or 5s pass (a hang guard, not a timing
// assertion).
func (l *logSink) waitFor(t *testing.T, substr string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if bytes.Contains([]byte(l.String()), []byte(substr)) {
			return
		}
	}
	t.Fatalf("log never contained %q; log:\n%s", substr, l.String())
}

// startServer serves h on a loopback port and stops it at cleanup.
func startServer(t testing.TB, cfg Config, h Handler) (*Server, string, *logSink) {
	t.Helper()
	logs := &logSink{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Listener == "" {
		cfg.Listener = "PLAINTEXT"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg, h)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, l.Addr().String(), logs
}

// dial connects to addr and closes the connection at cleanup.
func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// frame encodes req (version already set) as a full request frame.
func frame(req kmsg.Request, corrID int32, clientID string) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, corrID)
}

// readResponse reads one response frame and returns its payload.
func readResponse(t testing.TB, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	p := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, p); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return p
}

// decodeResponse splits a response payload into correlation id and body,
// skipping the tag byte of a flexible header, and decodes the body into resp.
func decodeResponse(t testing.TB, payload []byte, resp kmsg.Response, flexibleHeader bool) int32 {
	t.Helper()
	corr := int32(binary.BigEndian.Uint32(payload))
	body := payload[4:]
	if flexibleHeader {
		if body[0] != 0 {
			t.Fatalf("response header tag count %d, want 0", body[0])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %T v%d: %v", resp, resp.GetVersion(), err)
	}
	return corr
}

// expectClosed asserts the server closes c without sending anything more.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open after 5s")
	}
	if n != 0 {
		t.Fatalf("server sent %d bytes before closing", n)
	}
}

// apiHandler is a tiny broker: ApiVersions, Metadata (echoing the requested
// topics, one partition each, led by broker 0 at addr) and, through fetch,
// Fetch.
type apiHandler struct {
	host  string
	port  int32
	fetch func(ctx context.Context, req *Request, body *kmsg.FetchRequest) (*Response, error)
}

// setAddr points Metadata answers at addr.
func (h *apiHandler) setAddr(t testing.TB, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	h.host, h.port = host, int32(p)
}

func (h *apiHandler) Handle(ctx context.Context, req *Request) (*Response, error) {
	switch body := req.Body.(type) {
	case nil:
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 4}}
		return &Response{Msg: resp}, nil
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = req.Version
		for _, k := range []kmsg.Request{&kmsg.FetchRequest{}, &kmsg.MetadataRequest{}, &kmsg.ApiVersionsRequest{}} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.Key(), MaxVersion: k.MaxVersion()})
		}
		return &Response{Msg: resp}, nil
	case *kmsg.MetadataRequest:
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = req.Version
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: h.host, Port: h.port}}
		resp.ClusterID = kmsg.StringPtr("wire-test")
		for _, rt := range body.Topics {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = rt.Topic
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Leader, p.Replicas, p.ISR = 0, []int32{0}, []int32{0}
			t.Partitions = []kmsg.MetadataResponseTopicPartition{p}
			resp.Topics = append(resp.Topics, t)
		}
		return &Response{Msg: resp}, nil
	case *kmsg.FetchRequest:
		if h.fetch != nil {
			return h.fetch(ctx, req, body)
		}
	}
	return nil, fmt.Errorf("test handler: unexpected %T", req.Body)
}

// metadataRequest asks for the named topics at version v.
func metadataRequest(v int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = v
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}
