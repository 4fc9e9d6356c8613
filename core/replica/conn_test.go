package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestWireClient checks the FetchClient against kfake (a real Kafka
// protocol server over TCP): Fetch goes out at v12 with the replica
// fields, the other two requests are answered, and the same client keeps
// working across requests whose answers share its buffer.
func TestWireClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
		mech sasl.Mechanism
		kgo  []kgo.Opt
	}{
		{name: "plaintext"},
		{
			name: "sasl-plain",
			opts: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret")},
			mech: plain.Auth{User: "admin", Pass: "secret"}.AsMechanism(),
		},
		{
			name: "sasl-scram-sha-256",
			opts: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "secret")},
			mech: scram.Auth{User: "admin", Pass: "secret"}.AsSha256Mechanism(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			addr := c.ListenAddrs()[0]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			popts := []kgo.Opt{kgo.SeedBrokers(addr)}
			if tc.mech != nil {
				popts = append(popts, kgo.SASL(tc.mech))
			}
			prod, err := kgo.NewClient(popts...)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			for _, v := range []string{"hello", "world"} {
				if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}

			fc, err := WireDialer(ConnConfig{ClientID: "replica-test", SASL: tc.mech})(BrokerAddr{ID: 0, Addr: addr})
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			ft := &fetcher{cfg: Config{ReplicaID: -1, BrokerEpoch: -1}.normalized()}
			var first []byte
			for i, off := range []int64{0, 1} {
				req, _ := ft.request([]*followed{{p: &fixedPart{offset: off}, topic: "t", partition: 0}})
				resp, err := fc.Fetch(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Version != fetchVersion {
					t.Fatalf("Fetch went out as v%d, want v%d", resp.Version, fetchVersion)
				}
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Fatalf("response topics %+v", resp.Topics)
				}
				rp := resp.Topics[0].Partitions[0]
				if rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 || rp.HighWatermark != 2 {
					t.Fatalf("fetch %d: error %d, %d bytes, HW %d", i, rp.ErrorCode, len(rp.RecordBatches), rp.HighWatermark)
				}
				if i == 0 {
					first = rp.RecordBatches
					if !strings.Contains(string(first), "hello") {
						t.Fatalf("fetch from 0 lacks the first record: %q", first)
					}
				} else if strings.Contains(string(rp.RecordBatches), "hello") {
					t.Fatalf("fetch from 1 returned the first record: %q", rp.RecordBatches)
				}
			}

			lo := kmsg.NewPtrListOffsetsRequest()
			lo.ReplicaID = -1
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = "t"
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
			lr, err := fc.ListOffsets(ctx, lo)
			if err != nil || len(lr.Topics) != 1 || lr.Topics[0].Partitions[0].Offset != 2 {
				t.Fatalf("ListOffsets: %+v %v", lr, err)
			}
			oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
			ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
			ot.Topic = "t"
			op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			op.CurrentLeaderEpoch, op.LeaderEpoch = -1, 0
			ot.Partitions = append(ot.Partitions, op)
			oe.Topics = append(oe.Topics, ot)
			or, err := fc.OffsetForLeaderEpoch(ctx, oe)
			if err != nil || len(or.Topics) != 1 || len(or.Topics[0].Partitions) != 1 {
				t.Fatalf("OffsetForLeaderEpoch: %+v %v", or, err)
			}
		})
	}
}

// TestWireClientRefusedSASL: wrong credentials fail the request (kfake
// closes the connection; vltava answers the error code first) rather than
// hanging.
func TestWireClientRefusedSASL(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fc, err := WireDialer(ConnConfig{SASL: plain.Auth{User: "admin", Pass: "wrong"}.AsMechanism()})(BrokerAddr{Addr: c.ListenAddrs()[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	ft := &fetcher{cfg: Config{ReplicaID: -1, BrokerEpoch: -1}.normalized()}
	req, _ := ft.request([]*followed{{p: &fixedPart{}, topic: "t", partition: 0}})
	if _, err := fc.Fetch(ctx, req); err == nil || ctx.Err() != nil {
		t.Fatalf("Fetch with a wrong password: %v, want an error before the deadline", err)
	}
}

// TestWireClientCancel: cancelling the context ends a fetch parked on the
// leader's max wait at once and the client dials again afterwards.
func TestWireClientCancel(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	fc, err := WireDialer(ConnConfig{})(BrokerAddr{Addr: c.ListenAddrs()[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	ft := &fetcher{cfg: Config{ReplicaID: -1, BrokerEpoch: -1, MaxWait: time.Minute}.normalized()}
	req, _ := ft.request([]*followed{{p: &fixedPart{}, topic: "t", partition: 0}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	if _, err := fc.Fetch(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("cancelled fetch returned after %v", d)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	req.MaxWaitMillis = 10
	if _, err := fc.Fetch(ctx2, req); err != nil {
		t.Fatalf("Fetch after a cancelled one: %v", err)
	}
}

// fixedPart is a FollowerPartition at offset with no epochs.
type fixedPart struct{ offset int64 }

func (fixedPart) TopicPartition() (string, int32)          { return "t", 0 }
func (p fixedPart) FetchState() (int64, int32, int32)      { return p.offset, -1, -1 }
func (fixedPart) EndOffsetForEpoch(int32) (int32, int64)   { return -1, -1 }
func (fixedPart) AppendFetched([]byte, int64, int64) error { return nil }
func (fixedPart) TruncateTo(int64) error                   { return nil }
func (fixedPart) TruncateFullyAndStartAt(int64) error      { return nil }

// BenchmarkFetchClient fetches 1 MiB of record batches over and over
// from a canned server (a goroutine answering ApiVersions and Fetch with
// pre-encoded responses, allocating nothing per request), so -benchmem
// counts the client's allocations only: what a follower's fetch costs the
// garbage collector. kgo (the fetchers' client before WireDialer)
// allocates a buffer per response; WireDialer's client reuses one.
//
//	go test -run '^$' -bench FetchClient -benchmem ./core/replica/
func BenchmarkFetchClient(b *testing.B) {
	addr := cannedServer(b, 1<<20)
	ctx := context.Background()
	ft := &fetcher{cfg: Config{ReplicaID: -1, BrokerEpoch: -1}.normalized()}
	run := func(b *testing.B, fc FetchClient) {
		defer fc.Close()
		var n int
		for b.Loop() {
			req, _ := ft.request([]*followed{{p: &fixedPart{}, topic: "t", partition: 0}})
			resp, err := fc.Fetch(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			n = len(resp.Topics[0].Partitions[0].RecordBatches)
		}
		b.SetBytes(int64(n))
	}
	b.Run("wire", func(b *testing.B) {
		fc, err := WireDialer(ConnConfig{})(BrokerAddr{Addr: addr})
		if err != nil {
			b.Fatal(err)
		}
		run(b, fc)
	})
	b.Run("kgo", func(b *testing.B) {
		maxV := kversion.Stable()
		maxV.SetMaxKeyVersion(kmsg.Fetch.Int16(), fetchVersion)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(maxV))
		if err != nil {
			b.Fatal(err)
		}
		run(b, kgoFetch{cl.SeedBrokers()[0], cl})
	})
}

// cannedServer answers every connection's ApiVersions and Fetch requests
// with fixed responses, the Fetch one carrying size bytes of batches.
func cannedServer(b *testing.B, size int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version = 3
	for _, k := range []int16{kmsg.Fetch.Int16(), kmsg.ApiVersions.Int16(), kmsg.Metadata.Int16()} {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey = k
		ak.MaxVersion = map[int16]int16{kmsg.Fetch.Int16(): fetchVersion, kmsg.ApiVersions.Int16(): 3, kmsg.Metadata.Int16(): 9}[k]
		av.ApiKeys = append(av.ApiKeys, ak)
	}
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = fetchVersion
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.HighWatermark, fp.LastStableOffset = 1000, 1000
	fp.RecordBatches = make([]byte, size)
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	// Response frames: size, correlation ID (patched per request), the
	// header tags of flexible responses other than ApiVersions, the body.
	frame := func(body []byte, tags bool) []byte {
		out := make([]byte, 8)
		if tags {
			out = append(out, 0)
		}
		out = append(out, body...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		return out
	}
	avFrame, fetchFrame := frame(av.AppendTo(nil), false), frame(fr.AppendTo(nil), true)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				hdr := make([]byte, 12)
				body := make([]byte, 1<<16)
				for {
					if _, err := io.ReadFull(conn, hdr); err != nil {
						return
					}
					n := int(binary.BigEndian.Uint32(hdr)) - 8
					for n > 0 {
						m, err := conn.Read(body[:min(n, len(body))])
						if err != nil {
							return
						}
						n -= m
					}
					out := fetchFrame
					if int16(binary.BigEndian.Uint16(hdr[4:])) == kmsg.ApiVersions.Int16() {
						out = avFrame
					}
					copy(out[4:8], hdr[8:12])
					if _, err := conn.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// kgoFetch sends Fetch through a kgo.Broker, as the fetchers did before
// WireDialer (for BenchmarkFetchClient only).
type kgoFetch struct {
	b  *kgo.Broker
	cl *kgo.Client
}

func (k kgoFetch) Fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := k.b.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

func (kgoFetch) OffsetForLeaderEpoch(context.Context, *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	return nil, errors.New("not used")
}

func (kgoFetch) ListOffsets(context.Context, *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	return nil, errors.New("not used")
}

func (k kgoFetch) Close() { k.cl.Close() }
