package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/daemon/inspect"
)

// The broker's families. Per-partition series carry topic and partition
// labels and exist on every broker holding a replica; the partition-state
// counts (under-replicated, under-min-ISR) are reported by each
// partition's leader, offline partitions by the active controller only,
// so a sum over the cluster counts each partition once, as Kafka's
// UnderReplicatedPartitions and OfflinePartitionsCount do.
var (
	brokerInfo = prometheus.NewDesc("vltava_broker_info",
		"1, labelled with this broker's node id.", []string{"node_id"}, nil)
	controllerActive = prometheus.NewDesc("vltava_controller_active",
		"1 on the broker that is the active controller, 0 elsewhere.", nil, nil)
	connections = prometheus.NewDesc("vltava_connections",
		"Client connections open now.", nil, nil)
	connectionsAccepted = prometheus.NewDesc("vltava_connections_accepted_total",
		"Client connections accepted.", nil, nil)
	sendfileBytes = prometheus.NewDesc("vltava_fetch_sendfile_bytes_total",
		"Record bytes sent to consumers and followers with sendfile (zero copy).", nil, nil)
	copiedBytes = prometheus.NewDesc("vltava_fetch_copied_bytes_total",
		"Record bytes read and copied to consumers and followers (TLS, or zero copy off).", nil, nil)

	partitionsLed = prometheus.NewDesc("vltava_partitions_leader",
		"Partitions this broker leads.", nil, nil)
	partitionReplicas = prometheus.NewDesc("vltava_partitions",
		"Partition replicas this broker holds.", nil, nil)
	underReplicated = prometheus.NewDesc("vltava_partitions_under_replicated",
		"Partitions led here whose ISR is smaller than their replica set.", nil, nil)
	underMinISR = prometheus.NewDesc("vltava_partitions_under_min_isr",
		"Partitions led here whose ISR is smaller than min.insync.replicas (acks=all writes fail).", nil, nil)
	offline = prometheus.NewDesc("vltava_partitions_offline",
		"Partitions without a leader (reported by the active controller).", nil, nil)

	logSize = prometheus.NewDesc("vltava_log_size_bytes",
		"Bytes of the partition's log on this broker.", []string{"topic", "partition"}, nil)
	logSegments = prometheus.NewDesc("vltava_log_segments",
		"Segments of the partition's log on this broker.", []string{"topic", "partition"}, nil)
	logStart = prometheus.NewDesc("vltava_log_start_offset",
		"The partition's log start offset on this broker.", []string{"topic", "partition"}, nil)
	logEnd = prometheus.NewDesc("vltava_log_end_offset",
		"The partition's log end offset on this broker.", []string{"topic", "partition"}, nil)
	dirCapacity = prometheus.NewDesc("vltava_log_dir_capacity_bytes",
		"Size of the filesystem holding a log directory.", []string{"dir"}, nil)
	dirFree = prometheus.NewDesc("vltava_log_dir_free_bytes",
		"Bytes available to the broker on the filesystem holding a log directory.", []string{"dir"}, nil)
	topicBytesIn = prometheus.NewDesc("vltava_topic_bytes_in_total",
		"Record bytes producers appended to the topic's partitions led here.", []string{"topic"}, nil)
	topicRecordsIn = prometheus.NewDesc("vltava_topic_records_in_total",
		"Records producers appended to the topic's partitions led here.", []string{"topic"}, nil)
	topicBytesOut = prometheus.NewDesc("vltava_topic_bytes_out_total",
		"Record bytes sent to consumers from the topic's partitions led here.", []string{"topic"}, nil)
	topicReplBytesOut = prometheus.NewDesc("vltava_topic_replication_bytes_out_total",
		"Record bytes sent to followers from the topic's partitions led here.", []string{"topic"}, nil)
	isrShrinks = prometheus.NewDesc("vltava_isr_shrinks_total",
		"ISR shrinks this broker committed as a partition's leader.", nil, nil)
	isrExpands = prometheus.NewDesc("vltava_isr_expands_total",
		"ISR expansions this broker committed as a partition's leader.", nil, nil)
	elections = prometheus.NewDesc("vltava_leader_elections_total",
		"Leader elections this broker made as controller, by kind: clean (from the ISR) or unclean (possible data loss).", []string{"kind"}, nil)
	storeSession = prometheus.NewDesc("vltava_metadata_store_session_up",
		"1 while the broker holds its metadata-store session.", nil, nil)
	fencedDesc = prometheus.NewDesc("vltava_broker_fenced",
		"1 while the broker is fenced (no successful keep-alive within the session timeout, or its session ended): it leads nothing.", nil, nil)
	quotaRate = prometheus.NewDesc("vltava_quota_rate",
		"Measured rate of a client quota entity (bytes/s, or percent for request_percentage).", []string{"kind", "user", "client_id"}, nil)
	quotaThrottle = prometheus.NewDesc("vltava_quota_throttle_seconds_total",
		"Throttle time imposed on a client quota entity.", []string{"kind", "user", "client_id"}, nil)
	highWatermark = prometheus.NewDesc("vltava_partition_high_watermark",
		"The partition's high watermark (reported by its leader).", []string{"topic", "partition"}, nil)
)

// BrokerCollector reports a broker's figures at scrape time, and its
// request latencies and queue times as they happen (ObserveRequest,
// ObserveQueue).
type BrokerCollector struct {
	b        *broker.Broker
	requests *prometheus.HistogramVec
	queue    *prometheus.HistogramVec
	// byKey and queueByKey cache the histograms of each served API key,
	// so observing a request is an array index and an atomic add, no
	// label lookup.
	byKey      [128]prometheus.Observer
	queueByKey [128]prometheus.Observer
	in         *inspect.Inspector
}

// NewBrokerCollector returns the collector of b's figures. Register it
// with Server.Register and pass its ObserveRequest to broker.Options.
func NewBrokerCollector(b *broker.Broker) *BrokerCollector {
	c := &BrokerCollector{b: b}
	c.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vltava_request_duration_seconds",
		Help:    "Time to handle a request, by API (a fetch's long-poll wait and an acks=all produce's replication wait included).",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 18), // 25µs .. 3.3s
	}, []string{"api"})
	c.queue = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vltava_request_queue_seconds",
		Help:    "Time from a request being read off the socket to its handler starting, by API (Kafka's RequestQueueTimeMs: requests of one connection are handled in order, so it grows when the broker falls behind a pipelining client).",
		Buckets: prometheus.ExponentialBuckets(5e-6, 2, 20), // 5µs .. 2.6s
	}, []string{"api"})
	for _, k := range broker.APIKeys() {
		if int(k) < len(c.byKey) {
			c.byKey[k] = c.requests.WithLabelValues(broker.APIName(k))
			c.queueByKey[k] = c.queue.WithLabelValues(broker.APIName(k))
		}
	}
	return c
}

// SetBroker sets the broker to report; the collector is made before the
// broker so that its ObserveRequest can be handed to broker.New.
func (c *BrokerCollector) SetBroker(b *broker.Broker, in *inspect.Inspector) {
	c.b, c.in = b, in
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// ObserveRequest is a broker.Options.ObserveRequest.
func (c *BrokerCollector) ObserveRequest(key int16, took time.Duration) {
	if key >= 0 && int(key) < len(c.byKey) && c.byKey[key] != nil {
		c.byKey[key].Observe(took.Seconds())
	}
}

// ObserveQueue is a broker.Options.ObserveQueue.
func (c *BrokerCollector) ObserveQueue(key int16, queued time.Duration) {
	if key >= 0 && int(key) < len(c.queueByKey) && c.queueByKey[key] != nil {
		c.queueByKey[key].Observe(queued.Seconds())
	}
}

func (c *BrokerCollector) Describe(ch chan<- *prometheus.Desc) {
	c.requests.Describe(ch)
	c.queue.Describe(ch)
	for _, d := range []*prometheus.Desc{brokerInfo, controllerActive, connections, connectionsAccepted,
		sendfileBytes, copiedBytes, partitionsLed, partitionReplicas, underReplicated, underMinISR, offline,
		logSize, logSegments, logStart, logEnd, highWatermark, dirCapacity, dirFree,
		topicBytesIn, topicRecordsIn, topicBytesOut, topicReplBytesOut, quotaRate, quotaThrottle, isrShrinks, isrExpands, elections, storeSession, fencedDesc,
		groupLag, groupLagTotal, groupMembers} {
		ch <- d
	}
}

func (c *BrokerCollector) Collect(ch chan<- prometheus.Metric) {
	c.requests.Collect(ch)
	c.queue.Collect(ch)
	b := c.b
	if b == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(brokerInfo, 1, strconv.Itoa(int(b.NodeID())))
	controller := b.IsController()
	gauge(controllerActive, boolValue(controller))
	clean, unclean := b.Elections()
	ch <- prometheus.MustNewConstMetric(elections, prometheus.CounterValue, float64(clean), "clean")
	ch <- prometheus.MustNewConstMetric(elections, prometheus.CounterValue, float64(unclean), "unclean")
	live, fenced := b.StoreSession()
	gauge(storeSession, boolValue(live))
	gauge(fencedDesc, boolValue(fenced))
	shrinks, expands := b.ISRChanges()
	counter(isrShrinks, float64(shrinks))
	counter(isrExpands, float64(expands))
	st := b.Stats()
	gauge(connections, float64(st.Conns))
	counter(connectionsAccepted, float64(st.Accepted))
	counter(sendfileBytes, float64(st.SendfileBytes))
	counter(copiedBytes, float64(st.CopiedFileBytes))

	for _, dir := range b.LogDirs() {
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err == nil {
			gauge(dirCapacity, float64(fs.Blocks)*float64(fs.Bsize), dir)
			gauge(dirFree, float64(fs.Bavail)*float64(fs.Bsize), dir)
		}
	}

	var led, under, underMin, off int
	ps := b.PartitionStats()
	type flow struct{ in, recs, out, repl int64 }
	topics := map[string]*flow{}
	for _, p := range ps {
		part := strconv.Itoa(int(p.Partition))
		f := topics[p.Topic]
		if f == nil {
			f = &flow{}
			topics[p.Topic] = f
		}
		f.in, f.recs, f.out, f.repl = f.in+p.BytesIn, f.recs+p.RecordsIn, f.out+p.BytesOut, f.repl+p.ReplicationBytesOut
		gauge(logSize, float64(p.SizeBytes), p.Topic, part)
		gauge(logSegments, float64(p.Segments), p.Topic, part)
		gauge(logStart, float64(p.LogStart), p.Topic, part)
		gauge(logEnd, float64(p.LogEnd), p.Topic, part)
		if p.Offline {
			off++
		}
		if !p.Leader {
			continue
		}
		led++
		gauge(highWatermark, float64(p.HighWatermark), p.Topic, part)
		if p.ISR < p.Replicas {
			under++
		}
		if p.ISR < p.MinISR {
			underMin++
		}
	}
	for name, f := range topics {
		ch <- prometheus.MustNewConstMetric(topicBytesIn, prometheus.CounterValue, float64(f.in), name)
		ch <- prometheus.MustNewConstMetric(topicRecordsIn, prometheus.CounterValue, float64(f.recs), name)
		ch <- prometheus.MustNewConstMetric(topicBytesOut, prometheus.CounterValue, float64(f.out), name)
		ch <- prometheus.MustNewConstMetric(topicReplBytesOut, prometheus.CounterValue, float64(f.repl), name)
	}
	for _, q := range b.QuotaSensors() {
		user, client := q.Entity.User.String(), q.Entity.Client.String()
		ch <- prometheus.MustNewConstMetric(quotaRate, prometheus.GaugeValue, q.Rate, string(q.Kind), user, client)
		ch <- prometheus.MustNewConstMetric(quotaThrottle, prometheus.CounterValue, q.Throttle.Seconds(), string(q.Kind), user, client)
	}
	collectLag(c.in, ch)
	gauge(partitionReplicas, float64(len(ps)))
	gauge(partitionsLed, float64(led))
	gauge(underReplicated, float64(under))
	gauge(underMinISR, float64(underMin))
	if !controller {
		off = 0
	}
	gauge(offline, float64(off))
}

func boolValue(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
