package wire

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFrame builds a frame from a payload.
func rawFrame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// header builds a request header v1.
func header(key, version int16, corr int32, clientID string) []byte {
	b := kbin.AppendInt16(nil, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	return kbin.AppendNullableString(b, &clientID)
}

// truncatedProduce is a flexible Produce request cut short, with a
// consistent frame size.
func truncatedProduce() []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, 100)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	full := frame(req, 1, "p")
	return rawFrame(full[4 : len(full)-40])
}

// Bad input closes the connection without a response, logs the remote
// address and the reason, and never reaches the handler.
func TestBadInputCloses(t *testing.T) {
	metaV99 := metadataRequest(0)
	metaV99.Version = 99
	for _, tc := range []struct {
		name, log string
		in        []byte
	}{
		{"oversized frame", "request frame refused", binary.BigEndian.AppendUint32(nil, 200<<20)},
		{"negative size", "request frame refused", binary.BigEndian.AppendUint32(nil, 0xffffffff)},
		{"frame shorter than a header", "request frame refused", rawFrame([]byte{0, 3, 0})},
		{"garbage header", "unknown api key -1", rawFrame([]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))},
		{"unknown api key", "unknown api key 9999", rawFrame(header(9999, 0, 1, "x"))},
		{"client id past the end", "malformed request: header", rawFrame(append(header(3, 1, 1, "x")[:8], 0, 50, 'a'))},
		{"truncated body", "malformed request: body", truncatedProduce()},
		{"metadata v99", "version 99 not supported", frame(metaV99, 1, "x")},
		{"negative version", "version -1 not supported", rawFrame(header(3, -1, 1, "x"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var called atomic.Bool
			h := handlerFunc(func(context.Context, *Request) (*Response, error) {
				called.Store(true)
				return nil, nil
			})
			_, addr, logs := startServer(t, Config{}, h)
			c := dial(t, addr)
			if _, err := c.Write(tc.in); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			logs.waitFor(t, tc.log)
			logs.waitFor(t, "remote="+c.LocalAddr().String())
			if called.Load() {
				t.Fatal("handler called for a bad request")
			}
		})
	}
}

// A 200 MiB size prefix is refused before the payload buffer is allocated.
func TestOversizedFrameNotAllocated(t *testing.T) {
	_, addr, logs := startServer(t, Config{MaxRequestBytes: 1 << 20}, &apiHandler{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := dial(t, addr)
	c.Write(binary.BigEndian.AppendUint32(nil, 200<<20))
	expectClosed(t, c)
	logs.waitFor(t, "request frame refused")
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 32<<20 {
		t.Fatalf("allocated %d bytes while refusing a 200 MiB frame", d)
	}
	if !strings.Contains(logs.String(), "max 1048576") {
		t.Fatalf("log does not name the limit:\n%s", logs)
	}
}

// A frame announced as large but sent slowly is read into a buffer that
// grows with the bytes received, and still decodes.
func TestLargeFrameGrows(t *testing.T) {
	got := make(chan int, 1)
	h := handlerFunc(func(_ context.Context, req *Request) (*Response, error) {
		got <- len(req.Body.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records)
		return nil, nil
	})
	_, addr, _ := startServer(t, Config{}, h)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "big"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, 5<<20+123)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := dial(t, addr)
	b := frame(req, 1, "")
	for len(b) > 0 { // several writes, so the server sees partial frames
		n := min(len(b), 700<<10)
		if _, err := c.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if n := <-got; n != 5<<20+123 {
		t.Fatalf("records of %d bytes", n)
	}
}
