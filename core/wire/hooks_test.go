package wire

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// closeHandler answers ApiVersions, asking for a close when the client id
// is "close-after", and records ConnClosed calls.
type closeHandler struct {
	closed chan *ConnInfo
}

func (h *closeHandler) Handle(ctx context.Context, req *Request) (*Response, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = req.Version
	return &Response{Msg: resp, CloseAfter: req.ClientID == "close-after"}, nil
}

func (h *closeHandler) ConnClosed(info *ConnInfo) { h.closed <- info }

func TestCloseAfterWritesThenCloses(t *testing.T) {
	h := &closeHandler{closed: make(chan *ConnInfo, 4)}
	_, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 2
	if _, err := c.Write(frame(req, 7, "keep-open")); err != nil {
		t.Fatal(err)
	}
	var resp kmsg.ApiVersionsResponse
	resp.Version = 2
	if corr := decodeResponse(t, readResponse(t, c), &resp, false); corr != 7 {
		t.Fatalf("correlation id %d, want 7", corr)
	}
	if _, err := c.Write(frame(req, 8, "close-after")); err != nil {
		t.Fatal(err)
	}
	if corr := decodeResponse(t, readResponse(t, c), &resp, false); corr != 8 {
		t.Fatalf("correlation id %d, want 8", corr)
	}
	expectClosed(t, c)

	select {
	case info := <-h.closed:
		if info.ID != 1 {
			t.Errorf("ConnClosed for connection %d, want 1", info.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ConnClosed was not called after the connection closed")
	}
}

func TestConnClosedOnClientClose(t *testing.T) {
	h := &closeHandler{closed: make(chan *ConnInfo, 4)}
	_, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(frame(req, 1, "x")); err != nil {
		t.Fatal(err)
	}
	readResponse(t, c)
	select {
	case <-h.closed:
		t.Fatal("ConnClosed called while the connection is open")
	default:
	}
	c.Close()
	select {
	case <-h.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("ConnClosed was not called after the client closed")
	}
}
