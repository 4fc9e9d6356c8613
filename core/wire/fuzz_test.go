package wire

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
