package wire

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/plugins/sdk"
)

// A real franz-go client negotiates versions and gets correct answers,
// including for concurrent requests pipelined on one connection.
func TestFranzGoClient(t *testing.T) {
	h := &apiHandler{}
	s, addr, _ := startServer(t, Config{}, h)
	h.setAddr(t, addr)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	av, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if keys := av.(*kmsg.ApiVersionsResponse).ApiKeys; len(keys) != 3 {
		t.Fatalf("ApiVersions keys = %v", keys)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("topic-%d", i)
			resp, err := cl.Request(ctx, metadataRequest((&kmsg.MetadataRequest{}).MaxVersion(), name))
			if err != nil {
				errs <- err
				return
			}
			m := resp.(*kmsg.MetadataResponse)
			if len(m.Topics) != 1 || *m.Topics[0].Topic != name || m.Brokers[0].Port != h.port {
				errs <- fmt.Errorf("metadata for %s: topics %v brokers %v", name, m.Topics, m.Brokers)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st.Requests < 22 || st.Accepted < 1 {
		t.Errorf("stats %+v: want >= 22 requests", st)
	}
}

// Pipelined requests on one connection are handled one at a time and
// answered in request order, even when earlier ones take longer.
func TestPipelinedResponsesInOrder(t *testing.T) {
	inner := &apiHandler{}
	var active, maxActive atomic.Int32
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for m := maxActive.Load(); n > m && !maxActive.CompareAndSwap(m, n); m = maxActive.Load() {
		}
		time.Sleep(time.Duration(3-req.CorrelationID%3) * time.Millisecond)
		return inner.Handle(ctx, req)
	})
	_, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)

	const n = 30
	var out []byte
	for i := int32(1); i <= n; i++ {
		v := int16(i % 13) // mix flexible (>= 9) and not
		out = append(out, frame(metadataRequest(v, fmt.Sprint("t", i)), i, "pipeline")...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for i := int32(1); i <= n; i++ {
		v := int16(i % 13)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = v
		corr := decodeResponse(t, readResponse(t, c), resp, v >= 9)
		if corr != i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		if got := *resp.Topics[0].Topic; got != fmt.Sprint("t", i) {
			t.Fatalf("response %d is for topic %s", i, got)
		}
	}
	if m := maxActive.Load(); m != 1 {
		t.Errorf("handler ran %d requests of one connection at once, want 1", m)
	}
}

// The request fields and the connection info reach the handler.
func TestRequestFields(t *testing.T) {
	got := make(chan *Request, 1)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		got <- req
		return nil, nil // no response, like acks=0
	})
	_, addr, _ := startServer(t, Config{Listener: "INTERNAL"}, h)
	c := dial(t, addr)
	req := metadataRequest(12, "a")
	if _, err := c.Write(frame(req, 77, "client-x")); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.Key != 3 || r.Version != 12 || r.CorrelationID != 77 || r.ClientID != "client-x" {
		t.Fatalf("request %+v", r)
	}
	body, ok := r.Body.(*kmsg.MetadataRequest)
	if !ok || body.GetVersion() != 12 || *body.Topics[0].Topic != "a" {
		t.Fatalf("body %#v", r.Body)
	}
	ci := r.Conn
	if ci == nil || ci.ID == 0 || ci.Listener != "INTERNAL" || ci.Principal != sdk.Anonymous ||
		ci.Remote.String() != c.LocalAddr().String() || ci.Local.String() != addr {
		t.Fatalf("conn info %+v", ci)
	}
}

// A nil response sends nothing: the next response is the next request's.
func TestNilResponseSendsNothing(t *testing.T) {
	inner := &apiHandler{}
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		if req.CorrelationID == 1 {
			return nil, nil
		}
		return inner.Handle(ctx, req)
	})
	_, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	out := append(frame(metadataRequest(1, "x"), 1, ""), frame(metadataRequest(1, "y"), 2, "")...)
	c.Write(out)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	if corr := decodeResponse(t, readResponse(t, c), resp, false); corr != 2 {
		t.Fatalf("got correlation id %d, want 2", corr)
	}
}

// ApiVersions at a version kmsg does not know reaches the handler with a
// nil Body; its answer goes out with a v0 header (KIP-511).
func TestApiVersionsUnknownVersion(t *testing.T) {
	got := make(chan *Request, 1)
	inner := &apiHandler{}
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		got <- req
		return inner.Handle(ctx, req)
	})
	_, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	req.ClientSoftwareName = "future"
	// Encoding at v99 writes the header like a flexible version plus a body
	// kmsg would write for its newest version; the server must not decode it.
	if _, err := c.Write(frame(req, 5, "future-client")); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.Body != nil || r.Key != 18 || r.Version != 99 || r.ClientID != "future-client" {
		t.Fatalf("request %+v", r)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if corr := decodeResponse(t, readResponse(t, c), resp, false); corr != 5 {
		t.Fatalf("correlation id %d", corr)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d", resp.ErrorCode)
	}
}

// ApiVersions v3+ is flexible, but its response header stays v0.
func TestApiVersionsResponseHeaderV0(t *testing.T) {
	_, addr, _ := startServer(t, Config{}, &apiHandler{})
	c := dial(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	c.Write(frame(req, 9, "x"))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if corr := decodeResponse(t, readResponse(t, c), resp, false); corr != 9 || len(resp.ApiKeys) != 3 {
		t.Fatalf("corr %d keys %v", corr, resp.ApiKeys)
	}
}

// A handler error or panic closes the connection with a log line; other
// connections keep working.
func TestHandlerErrorCloses(t *testing.T) {
	inner := &apiHandler{}
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		switch req.ClientID {
		case "err":
			return nil, errors.New("boom-error")
		case "panic":
			panic("boom-panic")
		}
		return inner.Handle(ctx, req)
	})
	_, addr, logs := startServer(t, Config{}, h)
	for _, id := range []string{"err", "panic"} {
		c := dial(t, addr)
		c.Write(frame(metadataRequest(1), 1, id))
		expectClosed(t, c)
		logs.waitFor(t, "boom-"+id)
	}
	c := dial(t, addr)
	c.Write(frame(metadataRequest(1), 1, "ok"))
	readResponse(t, c)
}

// The handler's context is canceled when the client goes away, so a long
// poll ends.
func TestContextCanceledOnClientClose(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	_, addr, _ := startServer(t, Config{}, h)
	c := dial(t, addr)
	c.Write(frame(metadataRequest(1), 1, ""))
	<-started
	c.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ctx err %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not canceled after client close")
	}
}

// An idle connection is closed; one whose request takes longer than the
// idle timeout is not.
func TestIdleTimeout(t *testing.T) {
	const idle = 50 * time.Millisecond
	inner := &apiHandler{}
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		if req.ClientID == "slow" {
			time.Sleep(4 * idle)
		}
		return inner.Handle(ctx, req)
	})
	_, addr, logs := startServer(t, Config{IdleTimeout: idle}, h)

	busy := dial(t, addr)
	busy.Write(frame(metadataRequest(1, "x"), 1, "slow"))
	readResponse(t, busy)

	c := dial(t, addr)
	expectClosed(t, c)
	logs.waitFor(t, "idle")
}

// Close stops every goroutine, including connections blocked in a handler
// and connections blocked reading; Serve returns ErrServerClosed.
func TestCloseStopsAllGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	blocked := make(chan struct{}, 4)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		blocked <- struct{}{}
		<-ctx.Done()
		return nil, nil
	})
	s, addr, _ := startServer(t, Config{IdleTimeout: time.Minute}, h)
	for i := range 6 {
		c := dial(t, addr)
		if i < 4 {
			c.Write(frame(metadataRequest(1), 1, ""))
			<-blocked
		}
	}
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Conns != 6; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections registered, want 6", s.Stats().Conns)
		}
	}
	s.Close()
	if st := s.Stats(); st.Conns != 0 {
		t.Fatalf("%d connections open after Close", st.Conns)
	}
	// Close waited for the server's goroutines; the test's own Serve
	// goroutine exits right after. Poll as a hang guard.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
