package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// envPipeline makes the test binary one member of an exactly-once
// consume-transform-produce pipeline instead of running tests (see init):
// the kill -9 matrix starts each member as its own OS process, so killing
// one is a real crash.
const envPipeline = "VLTAVA_ACCEPTANCE_TXN_PIPELINE"

// pipelineSpec configures one pipeline member; it travels as JSON in
// envPipeline.
type pipelineSpec struct {
	Addrs          []string
	In, Out, Group string
	// TxnID is the member's transactional.id: a restarted member uses
	// its predecessor's, so InitProducerId fences it and aborts what it
	// left open.
	TxnID string
}

func init() {
	if spec := os.Getenv(envPipeline); spec != "" {
		os.Exit(runPipeline(spec))
	}
}

// runPipeline copies every record of spec.In to spec.Out with its key and
// value, one franz-go GroupTransactSession transaction per poll, until
// SIGTERM. Progress and errors go to stderr; an error ending a
// transaction that franz-go cannot recover from ends the process with
// exit code 3 (the test restarts it, as a supervisor would).
func runPipeline(raw string) int {
	var spec pipelineSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline spec:", err)
		return 2
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05.000"), spec.TxnID, fmt.Sprintf(format, args...))
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(spec.Addrs...), kgo.ClientID(spec.TxnID),
		kgo.TransactionalID(spec.TxnID), kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(spec.Group), kgo.ConsumeTopics(spec.In),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(4*time.Second), kgo.HeartbeatInterval(400*time.Millisecond),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.DefaultProduceTopic(spec.Out), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryTimeout(60*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(200*time.Millisecond),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string {
			return time.Now().Format("15:04:05.000 ") + spec.TxnID + " "
		})),
	)
	if err != nil {
		logf("new session: %v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(topic string, p int32, err error) { logf("fetch %s/%d: %v", topic, p, err) })
		if err := sess.Begin(); err != nil {
			logf("begin: %v", err)
			return 3
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					logf("produce: %v", err)
				}
			})
		})
		// A bounded End: a transaction that cannot end within a minute
		// is a hang the test reports by its missing progress.
		ectx, cancel := context.WithTimeout(context.Background(), time.Minute)
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		switch {
		case err != nil:
			logf("end (%d records): %v", n, err)
			return 3
		case !committed && n > 0:
			logf("aborted a transaction of %d records", n)
		}
	}
	sess.Close()
	return 0
}
