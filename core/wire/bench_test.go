package wire

import (
	"encoding/binary"
	"io"
	"sync/atomic"
	"testing"
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
