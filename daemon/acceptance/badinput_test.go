package acceptance

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
	"github.com/vltava/vltava/core/record/recordtest"
)

// TestBadInput sends malformed frames and a produce request with one
// corrupt batch over raw TCP. Each gets a clean close or a Kafka error
// code plus a log line, and the daemon keeps serving real clients.
func TestBadInput(t *testing.T) {
	d := startDaemon(t, nil)
	addr := d.Addr()
	adm := newAdmin(t, addr)
	createTopic(t, adm, "alive", 1, nil)
	createTopic(t, adm, "crc", 2, nil)
	logText := func() string { return string(d.Log()) }
	served := int64(0)

	closes := []struct {
		name  string
		bytes []byte
	}{
		// 200 MiB announced, a few bytes sent: refused before allocation.
		{"frame-200MiB", []byte{0x0c, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b}},
		{"frame-negative-size", []byte{0xff, 0xff, 0xff, 0xfe, 0x00, 0x00}},
		{"produce-v9-with-garbage-body", garbageRequest(0, 9, 40)},
		{"unknown-api-key", frame([]byte{0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff})},
	}
	for _, c := range closes {
		t.Run(c.name, func(t *testing.T) {
			before := len(logText())
			conn := dial(t, addr)
			if _, err := conn.Write(c.bytes); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, conn)
			if !waitFor(5*time.Second, func() bool { return strings.Contains(logText()[before:], "clos") }) {
				t.Errorf("no log line about closing the connection; log since:\n%s", logText()[before:])
			}
			checkServes(t, addr, served)
			served++
		})
	}

	t.Run("corrupt-crc-one-partition", func(t *testing.T) {
		ts := time.Now().UnixMilli()
		var recs []recordtest.Rec
		for i := range 3 {
			recs = append(recs, recordtest.Rec{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "good-%d", i), Timestamp: ts + int64(i)})
		}
		bad := recordtest.Batch(record.CodecNone, recs...)
		bad[17] ^= 0xff // the CRC field is bytes 17-20 of the batch
		good := recordtest.Batch(record.CodecZstd, recs...)

		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "crc"
		for p, b := range [][]byte{bad, good} {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			rp.Records = b
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)

		before := len(logText())
		conn := dial(t, addr)
		defer conn.Close()
		resp := roundTrip(t, conn, req, 7).(*kmsg.ProduceResponse)
		codes := map[int32]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				codes[rp.Partition] = rp.ErrorCode
				if rp.Partition == 1 && rp.BaseOffset != 0 {
					t.Errorf("good batch: base offset %d, want 0", rp.BaseOffset)
				}
			}
		}
		if codes[0] != kerr.CorruptMessage.Code {
			t.Errorf("batch with a bad CRC: error %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(codes[0]))
		}
		if c, ok := codes[1]; !ok || c != 0 {
			t.Errorf("good batch in the same request: error %v (answered %v), want none", kerr.ErrorForCode(c), ok)
		}

		ends := offsets(t, adm, "crc", true)
		if ends[0] != 0 || ends[1] != 3 {
			t.Errorf("end offsets %v, want partition 0 empty and partition 1 at 3", ends)
		}
		got := consume(t, addr, "crc", nil, ends)
		if len(got[0]) != 0 {
			t.Errorf("partition 0 holds %d records of the corrupt batch", len(got[0]))
		}
		for i, r := range got[1] {
			if r.Offset != int64(i) || string(r.Key) != string(recs[i].Key) || string(r.Value) != string(recs[i].Value) || r.Timestamp.UnixMilli() != recs[i].Timestamp {
				t.Errorf("partition 1 record %d: offset %d key %q value %q ts %d, want %q %q %d", i, r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), recs[i].Key, recs[i].Value, recs[i].Timestamp)
			}
		}
		if l := strings.ToLower(logText()[before:]); !strings.Contains(l, "crc") && !strings.Contains(l, "corrupt") {
			t.Errorf("no log line about the corrupt batch; log since:\n%s", logText()[before:])
		}
	})
}

// frame prefixes body with its big-endian length.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// garbageRequest is a well-framed request with a valid v2 header for key
// and version (correlation ID 1, null client ID, no tags) and a body of n
// random bytes.
func garbageRequest(key, version int16, n int) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = append(b, 0, 0, 0, 1, 0xff, 0xff, 0)
	r := rand.New(rand.NewPCG(3, 4))
	for range n {
		b = append(b, byte(r.Uint32()))
	}
	return frame(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// expectClosed reads from conn until the daemon closes it, failing if it
// stays open for 10s.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if err != nil && !isClosed(err) {
		t.Fatalf("connection still open after 10s (%d bytes answered): %v", n, err)
	}
}

// roundTrip writes req on conn as request corr and decodes the response.
func roundTrip(t *testing.T, conn net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	out := kmsg.NewRequestFormatter(kmsg.FormatterClientID("acceptance-raw")).AppendRequest(nil, req, corr)
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != 18 { // response header v1: tagged fields
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("response header has tagged fields %x", body[:min(len(body), 8)])
		}
		body = body[1:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %T: %v", resp, err)
	}
	return resp
}

// checkServes produces a record to topic "alive" with a fresh franz-go
// client and reads it back at offset want.
func checkServes(t *testing.T, addr string, want int64) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic("alive"))
	r := &kgo.Record{Value: fmt.Appendf(nil, "alive-%d", want)}
	produceSync(t, cl, r)
	if r.Offset != want {
		t.Errorf("daemon after bad input: produced at offset %d, want %d", r.Offset, want)
	}
	if got := fetchOne(t, addr, "alive", 0, r.Offset); string(got.Value) != string(r.Value) {
		t.Errorf("daemon after bad input: read %q, want %q", got.Value, r.Value)
	}
}
