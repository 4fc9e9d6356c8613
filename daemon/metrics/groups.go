package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	groupLag = prometheus.NewDesc("vltava_consumer_group_lag",
		"Records between a group's committed offset and the partition's end (high watermark), per partition, for the groups this broker coordinates.",
		[]string{"group", "topic", "partition"}, nil)
	groupLagTotal = prometheus.NewDesc("vltava_consumer_group_lag_sum",
		"A group's lag summed over its partitions.", []string{"group"}, nil)
	groupMembers = prometheus.NewDesc("vltava_consumer_group_members",
		"Members of a group this broker coordinates.", []string{"group", "state"}, nil)
)

// lagTimeout bounds the lag computation of one scrape.
const lagTimeout = 10 * time.Second

// groupLags computes consumer lag as an exporter does, through the Kafka
// API against this broker: list the groups, describe them, fetch their
// committed offsets and the partitions' end offsets (kadm's Lag, the same
// computation `vltava group describe` shows). Only the groups this broker
// coordinates are reported, so a sum over the cluster counts each once.
type groupLags struct {
	mu     sync.Mutex
	addr   func() string
	nodeID func() int32
	cl     *kgo.Client
}

func (g *groupLags) collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.addr == nil || g.addr() == "" {
		return // the broker is not listening yet
	}
	if g.cl == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr()), kgo.ClientID("vltava-metrics"))
		if err != nil {
			return
		}
		g.cl = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	lags, err := kadm.NewClient(g.cl).Lag(ctx)
	if err != nil {
		return
	}
	self := g.nodeID()
	for _, l := range lags {
		if l.Coordinator.NodeID != self || l.Error() != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(groupMembers, prometheus.GaugeValue, float64(len(l.Members)), l.Group, l.State)
		var sum int64
		for _, ml := range l.Lag.Sorted() {
			if ml.Lag < 0 {
				continue
			}
			sum += ml.Lag
			ch <- prometheus.MustNewConstMetric(groupLag, prometheus.GaugeValue, float64(ml.Lag), l.Group, ml.Topic, itoa(ml.Partition))
		}
		ch <- prometheus.MustNewConstMetric(groupLagTotal, prometheus.GaugeValue, float64(sum), l.Group)
	}
}

func (g *groupLags) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cl != nil {
		g.cl.Close()
		g.cl = nil
	}
}
