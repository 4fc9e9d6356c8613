package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzRequest feeds arbitrary payloads to DecodeRequest: it must never
// panic, must fail only with ErrMalformed, and what it accepts must be
// consistent and re-encodable. Seeds (testdata/fuzz/FuzzRequest) are real
// kmsg-encoded requests: produce, fetch, metadata, api versions, flexible
// and not, plus ControlledShutdown v0 (header v0) and ApiVersions v99.
func FuzzRequest(f *testing.F) {
	f.Add([]byte{})
	f.Add(header(18, 3, 1, "x"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, err := DecodeRequest(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if req.Body == nil {
			if req.Key != apiVersionsKey {
				t.Fatalf("nil body for key %d", req.Key)
			}
			return
		}
		if req.Body.Key() != req.Key || req.Body.GetVersion() != req.Version {
			t.Fatalf("body %d v%d for header %d v%d", req.Body.Key(), req.Body.GetVersion(), req.Key, req.Version)
		}
		_ = req.Body.AppendTo(nil)
	})
}

// Every seed in the corpus is a valid request (so the fuzzer starts from
// the decoder's deep paths, not its first check).
func TestFuzzSeedsDecode(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzRequest/*")
	if err != nil || len(files) < 10 {
		t.Fatalf("seed corpus: %d files, %v", len(files), err)
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lit := strings.TrimSpace(strings.TrimPrefix(string(raw), "go test fuzz v1\n"))
		lit = strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")")
		payload, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		req, err := DecodeRequest([]byte(payload))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if req.CorrelationID != 42 {
			t.Errorf("%s: correlation id %d", name, req.CorrelationID)
		}
		if req.Key != 7 && req.ClientID != "seed-client" { // ControlledShutdown v0 has no client id
			t.Errorf("%s: client id %q", name, req.ClientID)
		}
	}
}

// FuzzFrameReader feeds an arbitrary byte stream to a connection's frame
// reader with a small request pool: it must never panic or block, every
// frame it returns must be exactly the size announced and hold exactly
// its buffer's size of the pool, a frame the pool cannot admit or a truncated one
// must end reading with nothing left reserved, and decoding what it
// returns fails only with ErrMalformed.
func FuzzFrameReader(f *testing.F) {
	f.Add(frame(metadataRequest(9, "a"), 1, "c"))
	f.Add(append(frame(metadataRequest(1, "a", "b"), 1, "c"), frame(kmsg.NewPtrApiVersionsRequest(), 2, "")...))
	f.Add(binary.BigEndian.AppendUint32(nil, 300<<10))                     // more than the pool
	f.Add(append(binary.BigEndian.AppendUint32(nil, 200<<10), 0, 3, 0, 9)) // truncated body
	f.Add(binary.BigEndian.AppendUint32(nil, 0xffffffff))
	f.Fuzz(func(t *testing.T, stream []byte) {
		s := NewServer(Config{
			MaxRequestBytes:       1 << 20,
			QueuedMaxRequestBytes: 256 << 10,
			MaxConnections:        -1,
			Logger:                slog.New(slog.DiscardHandler),
		}, nil)
		// The frames come from stream; the socket only takes deadlines.
		nc, peer := net.Pipe()
		defer nc.Close()
		defer peer.Close()
		c := &conn{s: s, nc: nc, ctx: context.Background(), log: s.log}
		br := bufio.NewReader(bytes.NewReader(stream))
		rest := stream
		for {
			payload, reserved, err := c.readFrame(br)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errFrameSize) {
					t.Fatalf("read error %v", err)
				}
				if st := s.pool.stats(); st.used != 0 || st.waiting != 0 {
					t.Fatalf("pool %+v after a failed read", st)
				}
				return
			}
			want := int(binary.BigEndian.Uint32(rest))
			if len(payload) != want || !bytes.Equal(payload, rest[4:4+want]) || reserved != int64(payloadCap(want)) {
				t.Fatalf("frame of %d bytes, %d reserved; announced %d", len(payload), reserved, want)
			}
			if int64(cap(payload)) > reserved {
				t.Fatalf("payload buffer of %d bytes, %d reserved", cap(payload), reserved)
			}
			rest = rest[4+want:]
			if st := s.pool.stats(); st.used != reserved {
				t.Fatalf("pool %+v holding one frame of %d bytes", st, reserved)
			}
			if _, err := DecodeRequest(payload); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error %v is not ErrMalformed", err)
			}
			s.pool.release(reserved)
		}
	})
}
