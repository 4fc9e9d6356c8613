package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// saramaHandler records every record its session claims and marks it.
type saramaHandler struct{ o *ownership }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.o.consumed(&kgo.Record{Partition: m.Partition, Offset: m.Offset})
		s.MarkMessage(m, "")
	}
	return nil
}

// sarama's consumer group and a franz-go member share a topic and consume
// it to the end together.
func TestGroupSaramaWithFranzGo(t *testing.T) {
	b := testBroker(t, groupConfig)
	producer := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, producer, "orders", 6, nil)
	o := newOwnership(t)

	sc := sarama.NewConfig()
	sc.Version = sarama.V2_8_0_0
	sc.ClientID = "sarama-member"
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	sc.Consumer.Group.Session.Timeout = 2 * time.Second
	sc.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	sc.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	sc.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	grp, err := sarama.NewConsumerGroup([]string{b.Addr()}, "mixed", sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := grp.Consume(ctx, []string{"orders"}, saramaHandler{o}); err != nil && ctx.Err() == nil {
				t.Logf("sarama consume: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		grp.Close()
	})

	produceN(t, producer, "orders", 0, 120)
	waitFor(t, "sarama consumes alone", func() bool { return o.count() == 120 })
	startMember(t, b, o, "franz", "orders", "mixed", kgo.Balancers(kgo.RangeBalancer()))
	waitFor(t, "the franz-go member gets partitions", func() bool { m, _ := o.owners(); return m == 1 })
	produceN(t, producer, "orders", 120, 120)
	waitFor(t, "every record consumed", func() bool { return o.count() == 240 })
	checkGroupType(t, producer, "mixed", 2)
}
