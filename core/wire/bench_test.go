package wire

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchFrameSend measures fetch responses carrying one 1 MiB file
// range over loopback, sent with sendfile (zerocopy) or pread+write (copy).
// The MB/s column is file bytes delivered to the client.
func BenchmarkFetchFrameSend(b *testing.B) {
	const rangeLen = 1 << 20
	f, _ := segmentFile(b, 16<<20)
	for _, bc := range []struct {
		name string
		zc   bool
	}{{"zerocopy", true}, {"copy", false}} {
		b.Run(bc.name, func(b *testing.B) {
			var done atomic.Int64
			s, addr, _ := startServer(b, Config{ZeroCopy: bc.zc}, fetchHandler(f, &done))
			c := dial(b, addr)
			var reqs [][]byte
			for i := range 16 {
				reqs = append(reqs, frame(fetchRequest(16, []span{{int64(i) * rangeLen, rangeLen}}), int32(i), "bench"))
			}
			buf := make([]byte, 2*rangeLen)
			b.SetBytes(rangeLen)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := c.Write(reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf[:4]); err != nil {
					b.Fatal(err)
				}
				n := binary.BigEndian.Uint32(buf)
				if _, err := io.ReadFull(c, buf[:n]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(st.SendfileCalls)/float64(b.N), "sendfile/op")
		})
	}
}

// produceFrame is a produce request frame of about size bytes.
func produceFrame(size int, corr int32) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = 1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, size-100)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return frame(req, corr, "p")
}

// BenchmarkProduceFrameRead measures reading produce request frames of
// several sizes from one connection, one at a time (the handler answers
// at once): the cost of framing, the payload buffer's growth and decoding.
// The MB/s column is request bytes.
func BenchmarkProduceFrameRead(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			h := handlerFunc(func(_ context.Context, req *Request) (*Response, error) {
				return &Response{Msg: req.Body.(*kmsg.ProduceRequest).ResponseKind()}, nil
			})
			_, addr, _ := startServer(b, Config{}, h)
			c := dial(b, addr)
			req := produceFrame(size, 1)
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf[:4]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf[:binary.BigEndian.Uint32(buf)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchFrameSendTLS is BenchmarkFetchFrameSend over TLS (always
// the copying path, plus encryption), to compare with plaintext.
func BenchmarkFetchFrameSendTLS(b *testing.B) {
	const rangeLen = 1 << 20
	f, _ := segmentFile(b, 16<<20)
	fx := newTLSFixture(b)
	var done atomic.Int64
	_, addr, _ := startTLSServer(b, ListenerConfig{Name: "SSL", TLS: fx.serverConfig(b, "none")}, fetchHandler(f, &done))
	c, err := dialTLS(b, addr, fx.clientConfig(b, nil))
	if err != nil {
		b.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	var reqs [][]byte
	for i := range 16 {
		reqs = append(reqs, frame(fetchRequest(16, []span{{int64(i) * rangeLen, rangeLen}}), int32(i), "bench"))
	}
	buf := make([]byte, 2*rangeLen)
	b.SetBytes(rangeLen)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Write(reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			b.Fatal(err)
		}
		n := binary.BigEndian.Uint32(buf)
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}
