package acceptance

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// TestCreateManyPartitionsAtOnce (issue 13): one CreateTopics of 2,000
// partitions on three brokers over raft results in a topic whose every
// partition has a leader that takes a produce. Before the watch buffer
// counted writes, the one store write of 2,000 partition keys overflowed
// every broker's watch and sent each into a full re-listing.
func TestCreateManyPartitionsAtOnce(t *testing.T) {
	const parts = 2000
	c := startDefaultCluster(t, 3)
	adm := kadm.NewClient(clusterClient(t, c))
	adm.SetTimeoutMillis(int32((5 * time.Minute).Milliseconds()))
	ctx := testCtx(t, 5*time.Minute)
	resp, err := adm.CreateTopic(ctx, parts, 3, nil, "wide")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create: %v (%s)", err, resp.ErrMessage)
	}
	waitUntil(t, 2*time.Minute, "every partition led, on every broker", func() error {
		for _, p := range c.Brokers() {
			a := kadm.NewClient(newClient(t, p.Addr()))
			md, err := a.Metadata(ctx, "wide")
			a.Close()
			if err != nil {
				return err
			}
			td := md.Topics["wide"]
			if len(td.Partitions) != parts {
				return fmt.Errorf("broker %d: %d partitions", p.NodeID(), len(td.Partitions))
			}
			for _, pd := range td.Partitions {
				if pd.Err != nil || pd.Leader < 0 {
					return fmt.Errorf("broker %d: partition %d: leader %d, %v", p.NodeID(), pd.Partition, pd.Leader, pd.Err)
				}
			}
		}
		return nil
	})
	cl := clusterClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(parts))
	var rs []*kgo.Record
	for p := range int32(parts) {
		rs = append(rs, &kgo.Record{Topic: "wide", Partition: p, Value: []byte(strconv.Itoa(int(p)))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "wide")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 1 {
			t.Errorf("partition %d: end offset %d, %v; want 1", o.Partition, o.Offset, o.Err)
		}
	})
}

// TestCreateTopicsFigures measures one CreateTopics of many partitions
// (issue 13: seconds, not minutes) on one broker over its embedded store
// and on three brokers over raft, each with replication factor 1 and 3.
// A figure, not a pass/fail:
//
//	VLTAVA_CREATE_BENCH=10000 go test ./daemon/acceptance -run TestCreateTopicsFigures -v -timeout 30m
//
// The time is from the request to its answer, which comes once the broker
// it went to has applied every partition's state.
func TestCreateTopicsFigures(t *testing.T) {
	parts, _ := strconv.Atoi(os.Getenv("VLTAVA_CREATE_BENCH"))
	if parts <= 0 {
		t.Skip("a measurement: set VLTAVA_CREATE_BENCH=PARTITIONS (e.g. 10000)")
	}
	measure := func(t *testing.T, addr string, rf int16) {
		adm := kadm.NewClient(newClient(t, addr))
		adm.SetTimeoutMillis(int32((20 * time.Minute).Milliseconds()))
		ctx := testCtx(t, 25*time.Minute)
		waitCreates(ctx, t, adm)
		start := time.Now()
		resp, err := adm.CreateTopic(ctx, int32(parts), rf, nil, "wide")
		if err == nil {
			err = resp.Err
		}
		took := time.Since(start)
		if err != nil {
			t.Fatalf("create: %v (%s)", err, resp.ErrMessage)
		}
		t.Logf("one CreateTopics of %d partitions, replication factor %d: %v; load %s", parts, rf, took.Round(time.Millisecond), loadAvg())
	}
	t.Run("one broker", func(t *testing.T) {
		d := daemontest.Start(t, daemontest.Build(t))
		measure(t, d.Addr(), 1)
	})
	for _, rf := range []int16{1, 3} {
		t.Run(fmt.Sprintf("three brokers raft rf%d", rf), func(t *testing.T) {
			c := startDefaultCluster(t, 3)
			measure(t, c.Broker(1).Addr(), rf)
		})
	}
}
