package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/vltava/vltava/tools/internal/perfstat"
)

var perfCommands = []command{
	{path: "perf produce", args: "TOPIC", summary: "measure produce throughput and latency", run: perfProduce},
	{path: "perf consume", args: "TOPIC", summary: "measure consume throughput from the start of a topic", run: perfConsume},
}

// progressEvery is how often a perf command prints a progress line.
const progressEvery = time.Second

// perfOutput prints progress lines and the final figures. With JSON the
// final figures are one JSON object on stdout and progress goes to stderr,
// so a benchmark can parse stdout whole.
type perfOutput struct {
	json     bool
	progress io.Writer
	final    io.Writer
}

func newPerfOutput(e *env, asJSON bool) perfOutput {
	if asJSON {
		return perfOutput{json: true, progress: e.stderr, final: e.stdout}
	}
	return perfOutput{progress: e.stdout, final: e.stdout}
}

// reportEvery prints m's interval report every progressEvery until stop is
// closed; the returned function stops it and waits for it.
func (o perfOutput) reportEvery(m *perfstat.Meter) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				fmt.Fprintln(o.progress, m.Interval(now))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// startBar starts a progress bar on a terminal (startProgress) and
// routes the progress lines through it; call it before reportEvery.
func (o *perfOutput) startBar(e *env, label string, source func() (done, total int64)) *progressBar {
	bar := startProgress(e, label, o.json, source)
	o.progress = bar.Writer(o.progress)
	return bar
}

// summary prints the final report of a run named kind ("produce").
func (o perfOutput) summary(kind string, r perfstat.Report) error {
	if o.json {
		return json.NewEncoder(o.final).Encode(struct {
			Kind string `json:"kind"`
			perfstat.Report
		}{kind, r})
	}
	_, err := fmt.Fprintf(o.final, "%s total: %s, %.3f s\n", kind, r, r.Seconds)
	return err
}

func perfProduce(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var pf producerFlags
	pf.register(f)
	records := f.Int("records", 100000, "records to produce")
	size := f.Int("record-size", 1024, "value size in bytes (of the random payloads)")
	payloadFile := f.String("payload-file", "", "take each record's value at random from the payloads in `FILE` "+
		"(split at --payload-delimiter) instead of random letters")
	payloadDelim := f.String("payload-delimiter", `\n`, "what separates the payloads in --payload-file")
	asJSON := f.Bool("json", false, "print the final figures as JSON on stdout (progress goes to stderr)")
	prof := f.String("cpuprofile", "", "write this client's CPU profile to `FILE`")
	txnRecords := f.Int("transaction-records", 0, "produce in transactions of this many records, each committed "+
		"before the next begins (0: no transactions)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *records <= 0 || *size < 0 || *txnRecords < 0 {
		return usagef("--records must be positive, --record-size and --transaction-records not negative")
	}
	payloads, err := newPayloads(*size, *payloadFile, *payloadDelim)
	if err != nil {
		return err
	}
	stopProf, err := startCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stopProf()
	opts, err := pf.opts(e)
	if err != nil {
		return err
	}
	if *txnRecords > 0 {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("vltava-perf-%d-%d", os.Getpid(), time.Now().UnixNano())))
	}
	cl, err := e.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := newPerfOutput(e, *asJSON)
	m := perfstat.NewMeter(time.Now(), true)
	bar := out.startBar(e, "produce", func() (int64, int64) { return m.Records(), int64(*records) })
	defer bar.Stop()
	stop := out.reportEvery(m)
	var (
		mu       sync.Mutex
		firstErr error
	)
	for i := 0; i < *records && ctx.Err() == nil; i++ {
		if *txnRecords > 0 && i%*txnRecords == 0 {
			if err := perfTxnBoundary(ctx, cl, i > 0); err != nil {
				return err
			}
		}
		start := time.Now()
		cl.Produce(ctx, pf.record(pos[0], nil, payloads.next()), func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
				return
			}
			m.Add(1, int64(len(r.Value)), time.Since(start))
		})
	}
	flushErr := cl.Flush(ctx)
	if *txnRecords > 0 && flushErr == nil {
		flushErr = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	stop()
	bar.Stop()
	total := m.Total(time.Now())
	if err := out.summary("produce", total); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr == nil && flushErr != nil && !errors.Is(flushErr, context.Canceled) {
		firstErr = flushErr
	}
	if firstErr != nil {
		return fmt.Errorf("produce: %d of %d records failed, first: %w", int64(*records)-total.Records, *records, firstErr)
	}
	return nil
}

// perfTxnBoundary commits the running transaction (when end is set, after
// flushing its records) and begins the next.
func perfTxnBoundary(ctx context.Context, cl *kgo.Client, end bool) error {
	if end {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	return nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func perfConsume(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	records := f.Int("records", 100000, "records to consume from the start of the topic")
	idle := f.Duration("idle", 10*time.Second, "give up after this long without a record (the figures end at the last record)")
	asJSON := f.Bool("json", false, "print the final figures as JSON on stdout (progress goes to stderr)")
	raw := f.Bool("raw", false, "send Fetch requests and count records from batch headers without decoding them "+
		"(what the brokers serve, not what one consumer decodes); bytes are whole batches")
	prof := f.String("cpuprofile", "", "write this client's CPU profile to `FILE`")
	isolation := f.String("isolation", "read_uncommitted", "read_uncommitted or read_committed (transactions)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *records <= 0 {
		return usagef("--records must be positive")
	}
	iso := kgo.ReadUncommitted()
	switch *isolation {
	case "read_uncommitted":
	case "read_committed":
		iso = kgo.ReadCommitted()
	default:
		return usagef("--isolation %q: want read_uncommitted or read_committed", *isolation)
	}
	stopProf, err := startCPUProfile(*prof)
	if err != nil {
		return err
	}
	defer stopProf()
	if err := e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		return topicExists(ctx, adm, pos[0])
	}); err != nil {
		return err
	}
	var opts []kgo.Opt
	if !*raw {
		opts = append(opts, kgo.ConsumeTopics(pos[0]), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	}
	cl, err := e.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := newPerfOutput(e, *asJSON)
	m := perfstat.NewMeter(time.Now(), false)
	bar := out.startBar(e, "consume", func() (int64, int64) { return m.Records(), int64(*records) })
	defer bar.Stop()
	stop := out.reportEvery(m)
	kind, count := "consume", consumeCount
	if *raw {
		kind = "consume-raw"
		count = func(ctx context.Context, cl *kgo.Client, m *perfstat.Meter, want int64, idle time.Duration) (int64, error) {
			return consumeRaw(ctx, cl, pos[0], m, want, idle)
		}
	}
	got, err := count(ctx, cl, m, int64(*records), *idle)
	stop()
	bar.Stop()
	end := time.Now()
	if last := m.LastAdd(); err != nil && !last.IsZero() {
		end = last // the idle wait at the end is no part of the rate
	}
	if serr := out.summary(kind, m.Total(end)); serr != nil {
		return serr
	}
	if err != nil {
		return fmt.Errorf("consumed %d of %d records: %w", got, *records, err)
	}
	return nil
}

// errIdle reports that no record arrived within the idle timeout.
var errIdle = errors.New("no record within the timeout")

// consumeCount polls until want records were seen, counting into m, and
// stops early on an error or when idle passes without a record.
func consumeCount(ctx context.Context, cl *kgo.Client, m *perfstat.Meter, want int64, idle time.Duration) (int64, error) {
	var got int64
	for got < want {
		pctx, cancel := context.WithTimeout(ctx, idle)
		fetches := cl.PollRecords(pctx, int(min(want-got, 10000)))
		timedOut := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return got, ctx.Err()
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return got, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		var n, bytes int64
		fetches.EachRecord(func(r *kgo.Record) {
			if got+n < want {
				n++
				bytes += int64(len(r.Key) + len(r.Value))
			}
		})
		if n > 0 {
			m.Add(n, bytes, 0)
			got += n
		} else if timedOut {
			return got, errIdle
		}
	}
	return got, nil
}

// startCPUProfile starts a CPU profile into path ("" for none); the
// returned function stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
