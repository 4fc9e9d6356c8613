package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/core/config"
)

// TestFollowersLearnHWWithoutWaiting: with replica.fetch.wait.max.ms far
// longer than the test's deadline, both followers still learn the high
// watermark of an acks=all write promptly: a follower's parked fetch
// answers as soon as the high watermark is above the one it was last
// told, instead of waiting for the next append or the fetch max wait.
func TestFollowersLearnHWWithoutWaiting(t *testing.T) {
	c := startInProcCluster(t, 3, func(cfg *config.Broker) { cfg.ReplicaFetchWaitMaxMs = 60_000 })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	c.createAssigned(ctx, cl, "hw", [][]int32{{1, 2, 3}})
	for i := 1; i <= 3; i++ {
		produceAcksAll(ctx, t, cl, "hw", 1)
		want := int64(i)
		deadline := time.Now().Add(15 * time.Second) // a quarter of the fetch max wait
		for _, id := range []int32{2, 3} {
			for {
				hw := c.broker(id).topic("hw").partition(0).HighWatermark()
				if hw >= want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("write %d: follower %d has high watermark %d, want %d (the leader's is %d)",
						i, id, hw, want, c.broker(1).topic("hw").partition(0).HighWatermark())
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}
