package acceptance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// ack is one record the broker acknowledged.
type ack struct {
	partition int32
	offset    int64
	value     string
	ts        int64
}

// TestKill9Durability kills the daemon with SIGKILL while an acks=all
// producer writes to a flush.messages=1 topic, three times on the same
// data directory. After each restart every acknowledged record is at its
// offset with its value and timestamp, offsets are contiguous, values are
// not duplicated, and ListOffsets by timestamp and Fetch at an offset give
// Kafka's answers.
func TestKill9Durability(t *testing.T) {
	target := 3000
	if testing.Short() {
		target = 500
	}
	const topic = "durable"
	d := startDaemon(t, nil)
	createTopic(t, newAdmin(t, d.Addr()), topic, 3, map[string]string{"flush.messages": "1"})

	var acked []ack
	seq := 0
	tsBase := time.Now().Add(-24 * time.Hour).UnixMilli()
	for cycle := range 3 {
		acks := produceUntilKill(t, d, topic, cycle, target, tsBase, &seq)
		t.Logf("cycle %d: %d records acknowledged of %d sent before kill -9", cycle, len(acks), seq)
		acked = append(acked, acks...)
		d.Restart(t)
		verifyDurable(t, d.Addr(), topic, acked)
		if t.Failed() {
			return
		}
	}
}

// produceUntilKill produces continuously with acks=all until target
// records are acknowledged, kills the daemon with SIGKILL while the
// producer is still writing, and returns the acknowledgements.
func produceUntilKill(t *testing.T, d *daemontest.Proc, topic string, cycle, target int, tsBase int64, seq *int) []ack {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(d.Addr()),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.MaxBufferedRecords(2000),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	var acks []ack
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			s := *seq
			*seq++
			r := &kgo.Record{
				Value:     fmt.Appendf(nil, "c%d-%09d", cycle, s),
				Timestamp: time.UnixMilli(tsBase + int64(s)),
			}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acks = append(acks, ack{r.Partition, r.Offset, string(r.Value), r.Timestamp.UnixMilli()})
					mu.Unlock()
				}
			})
		}
	})
	reached := waitFor(60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= target
	})
	d.Kill9()
	cancel()
	wg.Wait()
	cl.Close() // fails what is still buffered; every promise has run after this
	mu.Lock()
	defer mu.Unlock()
	if !reached {
		t.Fatalf("cycle %d: only %d of %d records acknowledged in 60s", cycle, len(acks), target)
	}
	return acks
}

// verifyDurable reads topic from the start and checks it against acked.
func verifyDurable(t *testing.T, addr, topic string, acked []ack) {
	t.Helper()
	adm := newAdmin(t, addr)
	ends := offsets(t, adm, topic, true)
	recs := consume(t, addr, topic, nil, ends)
	seen := map[string]int64{}
	for p, end := range ends {
		rs := recs[p]
		if int64(len(rs)) != end {
			t.Errorf("partition %d: %d records below the end offset %d", p, len(rs), end)
		}
		for j, r := range rs {
			if r.Offset != int64(j) {
				t.Fatalf("partition %d: record %d has offset %d; offsets are not contiguous from 0", p, j, r.Offset)
			}
			k := string(r.Value)
			if prev, dup := seen[k]; dup {
				t.Errorf("value %q at p%d@%d duplicates the record at offset %d", k, p, r.Offset, prev)
			}
			seen[k] = r.Offset
		}
	}
	lost := 0
	for _, a := range acked {
		rs := recs[a.partition]
		if a.offset >= int64(len(rs)) || string(rs[a.offset].Value) != a.value || rs[a.offset].Timestamp.UnixMilli() != a.ts {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %q at p%d@%d (ts %d) is not there after kill -9", a.value, a.partition, a.offset, a.ts)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records lost", lost, len(acked))
	}
	for i := range 5 {
		a := acked[(len(acked)-1)*i/4]
		checkTimestampLookup(t, adm, topic, a.ts, recs, ends)
		r := fetchOne(t, addr, topic, a.partition, a.offset)
		if r.Offset != a.offset || string(r.Value) != a.value {
			t.Errorf("fetch at p%d@%d: got %q at offset %d, want %q", a.partition, a.offset, r.Value, r.Offset, a.value)
		}
	}
}
