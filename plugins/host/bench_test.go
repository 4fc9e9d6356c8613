package host

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rangeassignor "github.com/vltava/vltava/plugins/assignor/range"
	"github.com/vltava/vltava/plugins/host/internal/testplugin"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// The benchmarks time one plugin call in process (a direct Go call) and
// out of process (through serve and the host, over go-plugin's gRPC) and
// report the median and 99th percentile latency:
//
//	go test ./plugins/host -run '^$' -bench . -benchtime 2000x

// timeCalls runs call b.N times and reports p50 and p99 in µs.
func timeCalls(b *testing.B, call func() error) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// bigGroup has 100 members subscribed to 10 topics of 100 partitions.
func bigGroup() *sdk.Group {
	g := &sdk.Group{ID: "bench"}
	var topics []string
	for i := range 10 {
		name := fmt.Sprintf("topic-%d", i)
		topics = append(topics, name)
		g.Topics = append(g.Topics, sdk.Topic{Name: name, Partitions: 100})
	}
	for i := range 100 {
		g.MemberSet = append(g.MemberSet, sdk.Member{ID: fmt.Sprintf("member-%03d", i), Topics: topics})
	}
	return g
}

func benchHost(b *testing.B) *Host {
	h := New(Options{})
	b.Cleanup(func() { h.Close() })
	return h
}

func benchLoad(b *testing.B, h *Host, s Spec) *Plugin {
	p, err := h.Load(context.Background(), s)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkAssign1000Partitions100Members(b *testing.B) {
	g := bigGroup()
	run := func(b *testing.B, a sdk.Assignor) {
		timeCalls(b, func() error { _, err := a.Assign(context.Background(), g); return err })
	}
	b.Run("in-process", func(b *testing.B) { run(b, rangeassignor.Assignor{}) })
	b.Run("out-of-process", func(b *testing.B) {
		run(b, benchLoad(b, benchHost(b), spec(serve.KindAssignor, "range", nil)).Assignor())
	})
	// The breakdown of the out-of-process call. canned returns a stored
	// plan (the transport and both messages' encoding, no assignment
	// work); empty-group is the bare call (near-empty messages).
	b.Run("out-of-process/canned", func(b *testing.B) {
		run(b, benchLoad(b, benchHost(b), spec(serve.KindAssignor, "canned", nil)).Assignor())
	})
	b.Run("out-of-process/empty-group", func(b *testing.B) {
		a := benchLoad(b, benchHost(b), spec(serve.KindAssignor, "range", nil)).Assignor()
		empty := &sdk.Group{ID: "empty"}
		timeCalls(b, func() error { _, err := a.Assign(context.Background(), empty); return err })
	})
}

func BenchmarkAuthenticatorStep(b *testing.B) {
	// One Start + Step exchange (two calls) per iteration.
	run := func(b *testing.B, a sdk.Authenticator) {
		ctx := context.Background()
		timeCalls(b, func() error {
			s, err := a.Start(ctx, &sdk.StartRequest{Mechanism: "TOKEN"})
			if err != nil {
				return err
			}
			_, err = a.Step(ctx, &sdk.StepRequest{Session: s.Session, Token: []byte("alice:pw")})
			return err
		})
	}
	b.Run("in-process", func(b *testing.B) {
		a := &testplugin.Static{}
		if err := a.Configure(context.Background(), map[string]any{"users": []string{"alice:pw"}}); err != nil {
			b.Fatal(err)
		}
		run(b, a)
	})
	b.Run("out-of-process", func(b *testing.B) {
		run(b, benchLoad(b, benchHost(b), spec(serve.KindAuthenticator, "static", map[string]any{"users": []string{"alice:pw"}})).Authenticator())
	})
}

func BenchmarkMetadataStore(b *testing.B) {
	value := make([]byte, 256)
	stores := []struct {
		name string
		open func(b *testing.B) sdk.MetadataStore
	}{
		{"in-process", func(b *testing.B) sdk.MetadataStore {
			st, err := local.Open(filepath.Join(b.TempDir(), "m.db"), local.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		}},
		{"out-of-process", func(b *testing.B) sdk.MetadataStore {
			return benchLoad(b, benchHost(b), spec(serve.KindMetadataStore, "local", map[string]any{"path": filepath.Join(b.TempDir(), "m.db")})).MetadataStore()
		}},
	}
	ctx := context.Background()
	for _, s := range stores {
		b.Run("get/"+s.name, func(b *testing.B) {
			st := s.open(b)
			if _, err := st.Put(ctx, &sdk.PutRequest{Key: "topics/orders", Value: value, ExpectVersion: sdk.AnyVersion}); err != nil {
				b.Fatal(err)
			}
			timeCalls(b, func() error { _, err := st.Get(ctx, &sdk.GetRequest{Key: "topics/orders"}); return err })
		})
		b.Run("put/"+s.name, func(b *testing.B) {
			st := s.open(b)
			timeCalls(b, func() error {
				_, err := st.Put(ctx, &sdk.PutRequest{Key: "topics/orders", Value: value, ExpectVersion: sdk.AnyVersion})
				return err
			})
		})
	}
}
