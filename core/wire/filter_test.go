package wire

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/plugins/sdk"
)

// TestConnFilter: a refused address is closed before its request is read
// (the handler never sees it) and logged with the reason; an admitted
// one carries the filter's principal.
func TestConnFilter(t *testing.T) {
	principals := make(chan sdk.Principal, 4)
	h := handlerFunc(func(ctx context.Context, req *Request) (*Response, error) {
		principals <- req.Conn.Principal
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = req.Version
		return &Response{Msg: r}, nil
	})
	filter := func(_ context.Context, remote net.Addr, _ string) (sdk.Principal, bool, string) {
		if remote.(*net.TCPAddr).IP.Equal(net.IPv4(127, 0, 0, 2)) {
			return sdk.Principal{}, false, "rule 1: deny 127.0.0.2/32"
		}
		return sdk.Principal{Type: "User", Name: "local"}, true, ""
	}
	_, addr, logs := startServer(t, Config{ConnFilter: filter}, h)

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	refused, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	refused.Write(frame(req, 1, "x"))
	expectClosed(t, refused)
	logs.waitFor(t, "rule 1: deny 127.0.0.2/32")

	ok := dial(t, addr)
	if _, err := ok.Write(frame(req, 1, "x")); err != nil {
		t.Fatal(err)
	}
	readResponse(t, ok)
	if p := <-principals; p.Name != "local" {
		t.Fatalf("admitted connection's principal %v, want User:local", p)
	}
	select {
	case p := <-principals:
		t.Fatalf("the refused connection's request reached the handler (%v)", p)
	default:
	}
}
