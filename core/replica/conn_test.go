package replica

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
