package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// segmentFile writes n pseudo-random bytes to a temp file and returns it
// open, with its content.
func segmentFile(t testing.TB, n int) (*os.File, []byte) {
	t.Helper()
	content := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(content[i:], rng.Uint64())
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, content
}

// span is a file range requested by a test fetch: FetchOffset = Pos,
// PartitionMaxBytes = Len; Len 0 means "no data".
type span struct{ pos, len int64 }

// fetchRequest asks for spans spread over two topics.
func fetchRequest(v int16, spans []span) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	for ti, name := range []string{"alpha", "beta"} {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = name
		rt.TopicID = [16]byte{byte(ti + 1), 7}
		for i, s := range spans {
			if i%2 != ti {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(i)
			rp.FetchOffset = s.pos
			rp.PartitionMaxBytes = int32(s.len)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// fetchAnswer builds the response to req: one partition per requested
// one, with nil records and a range (file, FetchOffset, PartitionMaxBytes),
// plus fields that surround the records on the wire: aborted transactions,
// a tagged field, an error partition, and a partition with inline records.
func fetchAnswer(req *kmsg.FetchRequest, f *os.File) (*kmsg.FetchResponse, []FileRange) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	resp.SessionID = 42
	var ranges []FileRange
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark = rp.FetchOffset + 1000
			p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: rp.FetchOffset}}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 3, int32(rp.Partition)
			t.Partitions = append(t.Partitions, p)
			r := FileRange{}
			if rp.PartitionMaxBytes > 0 {
				r = FileRange{File: f, Pos: rp.FetchOffset, Len: int64(rp.PartitionMaxBytes)}
			}
			ranges = append(ranges, r)
		}
		inline := kmsg.NewFetchResponseTopicPartition()
		inline.Partition = 1000
		inline.RecordBatches = []byte("inline records, left alone")
		t.Partitions = append(t.Partitions, inline)
		resp.Topics = append(resp.Topics, t)
	}
	return resp, ranges
}

// inlineEncoding is what kmsg encodes for resp with each range's bytes
// inlined (empty for a zero range).
func inlineEncoding(resp *kmsg.FetchResponse, ranges []FileRange, content []byte) []byte {
	i := 0
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			p := &resp.Topics[ti].Partitions[pi]
			if p.RecordBatches != nil {
				continue
			}
			r := ranges[i]
			p.RecordBatches = append([]byte{}, content[r.Pos:r.Pos+r.Len]...)
			i++
		}
	}
	return resp.AppendTo(nil)
}

var fetchVersions = []int16{0, 4, 11, 12, 13, 16, 18}

var testSpans = []span{{0, 200}, {0, 0}, {5000, 70000}, {1 << 19, 1}, {777, 127}, {1000, 0}}

// FetchFrame's bytes equal kmsg's encoding with the records inlined.
func TestFetchFrameMatchesInlineEncoding(t *testing.T) {
	f, content := segmentFile(t, 1<<20)
	for _, v := range fetchVersions {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			resp, ranges := fetchAnswer(fetchRequest(v, testSpans), f)
			fr, err := FetchFrame(resp, ranges)
			if err != nil {
				t.Fatal(err)
			}
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					if p.Partition != 1000 && p.RecordBatches != nil {
						t.Fatal("FetchFrame left a sentinel in the response")
					}
				}
			}
			got, err := fr.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			want := inlineEncoding(resp, ranges, content)
			if !bytes.Equal(got, want) {
				t.Fatalf("frame (%d bytes) differs from inline encoding (%d bytes) at %d",
					len(got), len(want), firstDiff(got, want))
			}
			if fr.Len() != int64(len(want)) {
				t.Fatalf("Len %d, want %d", fr.Len(), len(want))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestFetchFrameErrors(t *testing.T) {
	f, _ := segmentFile(t, 100)
	resp, ranges := fetchAnswer(fetchRequest(12, testSpans), f)
	if _, err := FetchFrame(resp, ranges[1:]); err == nil {
		t.Error("too few ranges accepted")
	}
	bad := append([]FileRange{}, ranges...)
	bad[1] = FileRange{Len: 5} // no file
	if _, err := FetchFrame(resp, bad); err == nil {
		t.Error("range without a file accepted")
	}
	bad[1] = FileRange{File: f, Pos: -1, Len: 5}
	if _, err := FetchFrame(resp, bad); err == nil {
		t.Error("negative position accepted")
	}
}

// A sentinel prefix found outside a placeholder is detected, not spliced.
func TestSpliceRangesDetectsClash(t *testing.T) {
	prefix := []byte("0123456789ab")
	placeholder := append([]byte{0, 0, 0, sentinelLen}, prefix...)
	placeholder = append(placeholder, 0, 0, 0, 0)
	r := []FileRange{{}}
	ok := append(append([]byte("head"), placeholder...), "tail"...)
	if _, err := spliceRanges(ok, prefix, r, false); err != nil {
		t.Fatalf("clean body: %v", err)
	}
	for name, body := range map[string][]byte{
		"prefix after":     append(append([]byte{}, ok...), prefix...),
		"prefix before":    append(append([]byte{}, prefix...), ok...),
		"wrong len prefix": append([]byte{0, 0, 0, 99}, placeholder[4:]...),
	} {
		if _, err := spliceRanges(body, prefix, r, false); !errors.Is(err, errSentinelClash) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// fetchHandler answers Fetch with FetchFrame over f and counts Done calls.
func fetchHandler(f *os.File, done *atomic.Int64) *apiHandler {
	return &apiHandler{fetch: func(_ context.Context, req *Request, body *kmsg.FetchRequest) (*Response, error) {
		resp, ranges := fetchAnswer(body, f)
		fr, err := FetchFrame(resp, ranges)
		if err != nil {
			return nil, err
		}
		return &Response{Frame: fr, Done: func() { done.Add(1) }}, nil
	}}
}

// roundTrip sends a fetch for spans and checks the response bytes against
// the inline encoding and the decoded records against the file. It returns
// errors rather than failing, so goroutines can call it.
func roundTrip(c io.ReadWriter, f *os.File, content []byte, v int16, spans []span, corr int32) error {
	req := fetchRequest(v, spans)
	if _, err := c.Write(frame(req, corr, "fetcher")); err != nil {
		return err
	}
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return fmt.Errorf("reading response size: %w", err)
	}
	payload := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, payload); err != nil {
		return fmt.Errorf("reading response: %w", err)
	}
	if got := int32(binary.BigEndian.Uint32(payload)); got != corr {
		return fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := payload[4:]
	if v >= 12 { // response header v1: empty tag section
		if body[0] != 0 {
			return fmt.Errorf("v%d: header tag count %d", v, body[0])
		}
		body = body[1:]
	}
	want, ranges := fetchAnswer(req, f)
	if wantBytes := inlineEncoding(want, ranges, content); !bytes.Equal(body, wantBytes) {
		return fmt.Errorf("v%d: response body differs from inline encoding at %d", v, firstDiff(body, wantBytes))
	}
	got := kmsg.NewPtrFetchResponse()
	got.Version = v
	if err := got.ReadFrom(body); err != nil {
		return fmt.Errorf("v%d: decoding: %w", v, err)
	}
	n := 0
	for _, tp := range got.Topics {
		for _, p := range tp.Partitions {
			if p.Partition == 1000 {
				continue
			}
			s := spans[p.Partition]
			if !bytes.Equal(p.RecordBatches, content[s.pos:s.pos+s.len]) {
				return fmt.Errorf("v%d partition %d: records differ from file [%d, +%d)", v, p.Partition, s.pos, s.len)
			}
			n++
		}
	}
	if n != len(spans) {
		return fmt.Errorf("decoded %d partitions, want %d", n, len(spans))
	}
	return nil
}

// Fetch responses built by FetchFrame travel through a real socket, with
// sendfile or copying, and decode to the file's bytes.
func TestFetchRoundTrip(t *testing.T) {
	f, content := segmentFile(t, 1<<20)
	for _, zc := range []bool{true, false} {
		t.Run(fmt.Sprint("zerocopy=", zc), func(t *testing.T) {
			var done atomic.Int64
			s, addr, _ := startServer(t, Config{ZeroCopy: zc}, fetchHandler(f, &done))
			c := dial(t, addr)
			c.SetDeadline(time.Now().Add(20 * time.Second))
			for i, v := range fetchVersions {
				if err := roundTrip(c, f, content, v, testSpans, int32(i)); err != nil {
					t.Fatal(err)
				}
			}
			st := s.Stats()
			var fileBytes int64
			for _, sp := range testSpans {
				fileBytes += sp.len
			}
			fileBytes *= int64(len(fetchVersions))
			if zc && (st.SendfileCalls == 0 || st.SendfileBytes != fileBytes || st.CopiedFileBytes != 0) {
				t.Fatalf("zero copy on: stats %+v, want %d sendfile bytes", st, fileBytes)
			}
			if !zc && (st.SendfileCalls != 0 || st.CopiedFileBytes != fileBytes) {
				t.Fatalf("zero copy off: stats %+v, want %d copied bytes", st, fileBytes)
			}
			waitCount(t, &done, int64(len(fetchVersions)))
		})
	}
}

// Concurrent fetches of different ranges of one shared file each get
// their own bytes (positioned sendfile never moves a shared offset).
func TestConcurrentFetchesSameFile(t *testing.T) {
	f, content := segmentFile(t, 4<<20)
	var done atomic.Int64
	s, addr, _ := startServer(t, Config{ZeroCopy: true}, fetchHandler(f, &done))
	var wg sync.WaitGroup
	for g := range 4 {
		c := dial(t, addr)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 10 {
				spans := make([]span, 3)
				for j := range spans {
					l := rng.Int64N(400 << 10)
					spans[j] = span{rng.Int64N(int64(len(content)) - l), l}
				}
				if err := roundTrip(c, f, content, 16, spans, int32(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := s.Stats(); st.SendfileCalls == 0 || st.CopiedFileBytes != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A range past the end of the file closes the connection and logs; the
// client never gets a complete response; Done is still called.
func TestFetchRangePastEOF(t *testing.T) {
	f, content := segmentFile(t, 1000)
	for _, zc := range []bool{true, false} {
		t.Run(fmt.Sprint("zerocopy=", zc), func(t *testing.T) {
			var done atomic.Int64
			_, addr, logs := startServer(t, Config{ZeroCopy: zc}, fetchHandler(f, &done))
			c := dial(t, addr)
			c.Write(frame(fetchRequest(12, []span{{int64(len(content)) - 10, 100}}), 1, ""))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("read: %v", err)
			}
			if len(got) >= 4 && len(got)-4 >= int(got[0])<<24|int(got[1])<<16|int(got[2])<<8|int(got[3]) {
				t.Fatalf("client got a complete response of %d bytes", len(got))
			}
			logs.waitFor(t, "unexpected EOF")
			waitCount(t, &done, 1)
		})
	}
}

// wrapListener hides the *net.TCPConn type of accepted connections, as a
// TLS listener would.
type wrapListener struct{ net.Listener }

type wrappedConn struct{ net.Conn }

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrappedConn{c}, nil
}

// A connection that is not a *net.TCPConn falls back to copying even with
// ZeroCopy on.
func TestNonTCPConnCopies(t *testing.T) {
	f, content := segmentFile(t, 1<<20)
	var done atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{ZeroCopy: true}, fetchHandler(f, &done))
	served := make(chan error, 1)
	go func() { served <- s.Serve(wrapListener{l}) }()
	t.Cleanup(func() { s.Close(); <-served })
	c := dial(t, l.Addr().String())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := roundTrip(c, f, content, 13, testSpans, 1); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.SendfileCalls != 0 || st.CopiedFileBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A range larger than the socket buffers, to a client that is slow to
// read, is sent across several sendfile calls (EAGAIN waits on the
// netpoller) and arrives intact.
func TestSendfileLargeRangeSlowReader(t *testing.T) {
	const size = 12 << 20
	f, content := segmentFile(t, size)
	var done atomic.Int64
	s, addr, _ := startServer(t, Config{ZeroCopy: true}, fetchHandler(f, &done))
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	slow := &slowReader{Conn: c}
	if err := roundTrip(slow, f, content, 11, []span{{0, size}}, 1); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.SendfileCalls < 2 || st.SendfileBytes != size {
		t.Fatalf("stats %+v: want several sendfile calls", st)
	} else {
		t.Logf("stats %+v", st)
	}
}

// slowReader pauses before its first read so the server's socket buffer
// fills.
type slowReader struct {
	net.Conn
	started bool
}

func (r *slowReader) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		time.Sleep(100 * time.Millisecond)
	}
	return r.Conn.Read(p)
}

// waitCount waits until n reaches want: Done runs just after the last
// byte is handed to the socket, so the client may see the response first.
// It fails if n overshoots or does not get there within 5s (a hang guard).
func waitCount(t *testing.T, n *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := n.Load(); got != want {
		t.Fatalf("Done called %d times, want %d", got, want)
	}
}
