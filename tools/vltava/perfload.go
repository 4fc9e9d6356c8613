package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/tools/internal/perfstat"
)

// `vltava perf load` drives a broker with many clients at once: each
// producer and each consumer is its own franz-go client (its own
// connections), producers write as fast as they can for --duration and
// consumers tail the topic's partitions (dealt round-robin among them)
// from the end they found at the start. With --topics N the load is
// spread over N topics, TOPIC-0 .. TOPIC-(N-1), which share --partitions
// between them; producers write to them in turn. It reports every side's MiB/s,
// their sum, produce latency, and — given --broker-pid (local brokers'
// /proc/PID/stat, summed) or --metrics-url (its /metrics endpoint,
// vltava_process_cpu_seconds_total{process="broker"}) — the broker's CPU
// seconds over the run and per GiB moved, so a figure says whether the
// broker or the clients were the limit.
var perfLoadCommands = []command{
	{path: "perf load", args: "TOPIC", summary: "drive many producers and consumers at once; report aggregate throughput and the broker's CPU", run: perfLoad},
}

// loadReport is the final figure of `perf load`.
type loadReport struct {
	Producers      int              `json:"producers"`
	Consumers      int              `json:"consumers"`
	Topics         int              `json:"topics"`
	Partitions     int              `json:"partitions"`
	Produce        perfstat.Report  `json:"produce"`
	Consume        *perfstat.Report `json:"consume,omitempty"`
	AggregateMiBs  float64          `json:"aggregate_mb_per_sec"`
	BrokerCPUSecs  *float64         `json:"broker_cpu_seconds,omitempty"`
	BrokerCPUUtil  *float64         `json:"broker_cpu_cores,omitempty"`
	CPUSecsPerGiB  *float64         `json:"broker_cpu_seconds_per_gib,omitempty"`
	ProduceErrors  int64            `json:"produce_errors"`
	FirstErrorText string           `json:"first_error,omitempty"`
}

func perfLoad(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var pf producerFlags
	pf.register(f)
	producers := f.Int("producers", 4, "producer clients, each with its own connections")
	consumers := f.Int("consumers", 4, "consumer clients tailing the topic (0: produce only)")
	partitions := f.Int("partitions", 0, "create TOPIC with this many partitions if it does not exist (0: it must exist); with --topics, in total")
	ntopics := f.Int("topics", 1, "spread the load over this many topics, TOPIC-0..TOPIC-(N-1), sharing --partitions (1: TOPIC itself)")
	rf := f.Int("replication-factor", -1, "replication factor when creating TOPIC (-1: the broker's default)")
	topicConfigs := f.String("topic-config", "", "configs for creating TOPIC, `K=V[,K=V...]` (e.g. flush.messages=1)")
	duration := f.Duration("duration", 10*time.Second, "how long the producers write")
	size := f.Int("record-size", 1024, "value size in bytes")
	inflight := f.Int("max-buffered", 10000, "records each producer buffers before Produce blocks")
	pids := f.String("broker-pid", "", "read the brokers' CPU time from /proc/PID/stat, summed over `PID[,PID...]` (brokers on this machine: give every broker of a cluster)")
	metricsURL := f.String("metrics-url", "", "read the broker's CPU time from this /metrics `URL` instead")
	asJSON := f.Bool("json", false, "print the final figures as JSON on stdout (progress goes to stderr)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *producers <= 0 || *consumers < 0 || *duration <= 0 || *size < 0 || *inflight <= 0 || *ntopics <= 0 {
		return usagef("--producers, --topics and --duration must be positive, --consumers and --record-size not negative")
	}
	if *partitions > 0 && *partitions < *ntopics {
		return usagef("--partitions %d can not be spread over --topics %d", *partitions, *ntopics)
	}
	topic := pos[0]
	topics := []string{topic}
	if *ntopics > 1 {
		topics = topics[:0]
		for i := range *ntopics {
			topics = append(topics, fmt.Sprintf("%s-%d", topic, i))
		}
	}
	configs := map[string]*string{}
	if *topicConfigs != "" {
		for _, kv := range strings.Split(*topicConfigs, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("--topic-config %q: want K=V[,K=V...]", *topicConfigs)
			}
			configs[k] = kadm.StringPtr(v)
		}
	}
	var nparts int
	if err := e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		for i, t := range topics {
			if *partitions <= 0 {
				break
			}
			// The first partitions%topics topics take one more.
			n := *partitions / len(topics)
			if i < *partitions%len(topics) {
				n++
			}
			resp, err := adm.CreateTopic(ctx, int32(n), int16(*rf), configs, t)
			if err == nil {
				err = resp.Err
			}
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return err
			}
		}
		for _, t := range topics {
			n, err := waitPartitions(ctx, adm, t, *partitions > 0)
			if err != nil {
				return err
			}
			nparts += n
		}
		return nil
	}); err != nil {
		return err
	}
	var pidList []int
	if *pids != "" {
		for _, p := range strings.Split(*pids, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || n <= 0 {
				return usagef("--broker-pid %q: want PID[,PID...]", *pids)
			}
			pidList = append(pidList, n)
		}
	}
	cpu, err := brokerCPUReader(pidList, *metricsURL)
	if err != nil {
		return err
	}
	popts, err := pf.opts(e)
	if err != nil {
		return err
	}
	popts = append(popts, kgo.MaxBufferedRecords(*inflight))

	// Consumers start at the end offsets found now and read what the
	// producers write.
	var ends kadm.ListedOffsets
	if err := e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		// A topic just created may not be on every broker yet: retry
		// retriable errors (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER...).
		for {
			var err error
			ends, err = adm.ListEndOffsets(ctx, topics...)
			if err == nil {
				err = ends.Error()
			}
			if err == nil || !kerr.IsRetriable(err) {
				return err
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		}
	}); err != nil {
		return err
	}
	var clients []*kgo.Client
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	prodCls := make([]*kgo.Client, *producers)
	for i := range prodCls {
		cl, err := e.client(popts...)
		if err != nil {
			return err
		}
		prodCls[i] = cl
		clients = append(clients, cl)
	}
	consCls := make([]*kgo.Client, 0, *consumers)
	// Deal every partition of every topic round-robin to the consumers.
	dealt := make([]map[string]map[int32]kgo.Offset, min(*consumers, nparts))
	k := 0
	for _, t := range topics {
		if len(dealt) == 0 {
			break // --consumers 0
		}
		var ps []int32
		for p := range ends[t] {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		for _, p := range ps {
			o := ends[t][p]
			at := dealt[k%len(dealt)]
			if at == nil {
				at = map[string]map[int32]kgo.Offset{}
				dealt[k%len(dealt)] = at
			}
			if at[t] == nil {
				at[t] = map[int32]kgo.Offset{}
			}
			at[t][o.Partition] = kgo.NewOffset().At(o.Offset)
			k++
		}
	}
	for _, at := range dealt {
		cl, err := e.client(kgo.ConsumePartitions(at))
		if err != nil {
			return err
		}
		consCls = append(consCls, cl)
		clients = append(clients, cl)
	}

	out := newPerfOutput(e, *asJSON)
	pm := perfstat.NewMeter(time.Now(), true)
	cm := perfstat.NewMeter(time.Now(), false)
	barStart := time.Now()
	bar := out.startBar(e, "load (s)", func() (int64, int64) {
		return int64(time.Since(barStart) / time.Second), int64(*duration / time.Second)
	})
	defer bar.Stop()
	stopProgress := out.reportEvery(pm)
	cpu0, err := cpu()
	if err != nil {
		return err
	}
	start := time.Now()
	pctx, cancelProduce := context.WithDeadline(ctx, start.Add(*duration))
	defer cancelProduce()
	cctx, cancelConsume := context.WithCancel(ctx)
	defer cancelConsume()

	var (
		mu       sync.Mutex
		firstErr error
		nErr     int64
		pwg, cwg sync.WaitGroup
	)
	value := make([]byte, *size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	for _, cl := range prodCls {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			// Produce under ctx, not pctx: a record buffered when the
			// duration ends is still delivered and counted, rather than
			// failed after it may have been written.
			for n := 0; pctx.Err() == nil; n++ {
				sent := time.Now()
				cl.Produce(ctx, &kgo.Record{Topic: topics[n%len(topics)], Value: value}, func(r *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						nErr++
						firstErr = cmpErr(firstErr, err)
						mu.Unlock()
						return
					}
					pm.Add(1, int64(len(r.Value)), time.Since(sent))
				})
			}
		}()
	}
	for _, cl := range consCls {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for cctx.Err() == nil {
				fs := cl.PollRecords(cctx, 10000)
				var n, bytes int64
				fs.EachRecord(func(r *kgo.Record) { n++; bytes += int64(len(r.Key) + len(r.Value)) })
				if n > 0 {
					cm.Add(n, bytes, 0)
				}
			}
		}()
	}
	pwg.Wait()
	// Records produced before the deadline are still in flight: wait for
	// them (bounded), then give the consumers until they caught up.
	fctx, cancelFlush := context.WithTimeout(ctx, e.timeout)
	for _, cl := range prodCls {
		cl.Flush(fctx)
	}
	cancelFlush()
	prodEnd := time.Now()
	if len(consCls) > 0 {
		deadline := time.Now().Add(30 * time.Second)
		for cm.Records() < pm.Records() && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	end := time.Now()
	cpu1, cpuErr := cpu()
	cancelConsume()
	cwg.Wait()
	stopProgress()
	bar.Stop()

	r := loadReport{Producers: len(prodCls), Consumers: len(consCls), Topics: len(topics), Partitions: nparts, ProduceErrors: nErr}
	r.Produce = pm.Total(prodEnd)
	moved := r.Produce.Bytes
	if len(consCls) > 0 {
		cr := cm.Total(end)
		r.Consume = &cr
		moved += cr.Bytes
		// Both sides over the whole window: what the broker carried.
		r.AggregateMiBs = float64(moved) / (1 << 20) / end.Sub(start).Seconds()
	} else {
		r.AggregateMiBs = r.Produce.MBPerSec
	}
	if cpu0 >= 0 && cpuErr == nil && cpu1 >= 0 {
		secs := cpu1 - cpu0
		cores := secs / end.Sub(start).Seconds()
		r.BrokerCPUSecs, r.BrokerCPUUtil = &secs, &cores
		if moved > 0 {
			perGiB := secs / (float64(moved) / (1 << 30))
			r.CPUSecsPerGiB = &perGiB
		}
	}
	if firstErr != nil {
		r.FirstErrorText = firstErr.Error()
	}
	if err := printLoad(out, r); err != nil {
		return err
	}
	if firstErr != nil {
		return fmt.Errorf("perf load: %d records failed, first: %w", nErr, firstErr)
	}
	return nil
}

func printLoad(out perfOutput, r loadReport) error {
	if out.json {
		return json.NewEncoder(out.final).Encode(struct {
			Kind string `json:"kind"`
			loadReport
		}{"load", r})
	}
	w := out.final
	fmt.Fprintf(w, "load: %d producers, %d consumers, %d topics, %d partitions\n", r.Producers, r.Consumers, r.Topics, r.Partitions)
	fmt.Fprintf(w, "produce total: %s, %.3f s\n", r.Produce, r.Produce.Seconds)
	if r.Consume != nil {
		fmt.Fprintf(w, "consume total: %s, %.3f s\n", *r.Consume, r.Consume.Seconds)
	}
	fmt.Fprintf(w, "aggregate: %.1f MiB/s", r.AggregateMiBs)
	if r.BrokerCPUSecs != nil {
		fmt.Fprintf(w, "; broker cpu %.2f s (%.2f cores)", *r.BrokerCPUSecs, *r.BrokerCPUUtil)
		if r.CPUSecsPerGiB != nil {
			fmt.Fprintf(w, ", %.3f cpu-s/GiB", *r.CPUSecsPerGiB)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// waitPartitions returns the number of partitions of topic once every
// one has a leader (a topic just created may not have them yet); a
// missing topic is an error at once unless it was just created.
func waitPartitions(ctx context.Context, adm *kadm.Client, topic string, created bool) (int, error) {
	for {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return 0, err
		}
		td, ok := md.Topics[topic]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			err = fmt.Errorf("topic %s %w", topic, errNoTopic)
			if !created {
				return 0, err
			}
		case td.Err != nil && !errors.Is(td.Err, kerr.LeaderNotAvailable):
			return 0, fmt.Errorf("topic %s: %w", topic, td.Err)
		default:
			ready := len(td.Partitions) > 0
			for _, p := range td.Partitions {
				ready = ready && p.Leader >= 0
			}
			if ready {
				return len(td.Partitions), nil
			}
			err = fmt.Errorf("topic %s: partitions without a leader", topic)
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// brokerCPUReader returns a function reading the brokers' CPU seconds
// (user + system, summed over pids) so far, or -1 when neither source
// was given.
func brokerCPUReader(pids []int, metricsURL string) (func() (float64, error), error) {
	switch {
	case len(pids) > 0 && metricsURL != "":
		return nil, usagef("give --broker-pid or --metrics-url, not both")
	case len(pids) > 0:
		read := func() (float64, error) {
			var sum float64
			for _, pid := range pids {
				s, err := procCPUSeconds(pid)
				if err != nil {
					return 0, err
				}
				sum += s
			}
			return sum, nil
		}
		_, err := read()
		return read, err
	case metricsURL != "":
		read := func() (float64, error) { return metricsCPUSeconds(metricsURL) }
		_, err := read()
		return read, err
	}
	return func() (float64, error) { return -1, nil }, nil
}

// procCPUSeconds reads utime + stime of pid (/proc/PID/stat, through
// prometheus/procfs as the daemon's process metrics).
func procCPUSeconds(pid int) (float64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("broker cpu: %w", err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("broker cpu: %w", err)
	}
	return st.CPUTime(), nil
}

// metricsCPUSeconds reads vltava_process_cpu_seconds_total{process="broker"}
// from a Prometheus text endpoint.
func metricsCPUSeconds(url string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("broker cpu: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("broker cpu: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("broker cpu: %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "vltava_process_cpu_seconds_total{") || !strings.Contains(line, `process="broker"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("broker cpu: %q: %w", line, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("broker cpu: %w", err)
	}
	return 0, fmt.Errorf(`broker cpu: %s has no vltava_process_cpu_seconds_total{process="broker"}`, url)
}
