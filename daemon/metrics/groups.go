package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vltava/vltava/daemon/inspect"
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

// collectLag reports consumer lag as an exporter does, through the Kafka
// API against this broker (inspect.CoordinatedLag, which the console's
// figures use too), for the groups this broker coordinates, so a sum over
// the cluster counts each group once.
func collectLag(in *inspect.Inspector, ch chan<- prometheus.Metric) {
	if in == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	lags, err := in.CoordinatedLag(ctx)
	if err != nil {
		return
	}
	for _, l := range lags {
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
