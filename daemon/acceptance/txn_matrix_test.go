package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/daemon/daemontest"
)

// The kill -9 matrix of issue 11's acceptance: franz-go
// GroupTransactSession pipelines copy an input topic to an output topic
// on three brokers with RF=3 while, one after another, the leader of an
// input partition, of an output partition, of the group's
// __consumer_offsets partition and of a pipeline member's
// __transaction_state partition is kill -9ed and restarted, and a
// pipeline member is kill -9ed and restarted. Afterwards the output read
// with read_committed holds every input record exactly once, in order per
// key.
//
// By default the faults run in sequence within one cluster run;
// VLTAVA_TXN_MATRIX_LONG=1 also gives each fault a cluster run of its
// own, with the fault repeated three times.

// txnFault is one row of the matrix: whom to kill.
type txnFault struct {
	name string
	// broker names the broker to kill -9 (and restart) in a running
	// pipeline; nil for a member fault.
	broker func(m *txnMatrix) int32
}

var txnFaults = []txnFault{
	{"input-leader", func(m *txnMatrix) int32 { return waitLeader(m.t, m.c, m.in, 0, -1) }},
	{"output-leader", func(m *txnMatrix) int32 { return waitLeader(m.t, m.c, m.out, 1, -1) }},
	{"offsets-leader", func(m *txnMatrix) int32 { return m.coordinator(0, m.group) }},
	{"txn-state-leader", func(m *txnMatrix) int32 { return m.coordinator(1, m.members[0].spec.TxnID) }},
	{"pipeline-member", nil},
}

func TestTransactionsKill9Matrix(t *testing.T) {
	long := os.Getenv("VLTAVA_TXN_MATRIX_LONG") != ""
	t.Run("sequence", func(t *testing.T) { runTxnMatrix(t, txnFaults, 1) })
	if !long {
		return
	}
	for _, f := range txnFaults {
		t.Run(f.name, func(t *testing.T) { runTxnMatrix(t, []txnFault{f}, 3) })
	}
}

// txnMatrix is one cluster run of the matrix.
type txnMatrix struct {
	t              *testing.T
	c              *daemontest.Cluster
	adm            *kadm.Client
	in, out, group string
	members        []*pipelineMember
	produced       atomic.Int64
}

// pipelineMember is one member process and its restarts.
type pipelineMember struct {
	spec     pipelineSpec
	log      string // stderr of every run, appended
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd is reaped
	stopping bool          // the test stops it; an exit is no surprise
	exits    []string      // unexpected exits
}

func runTxnMatrix(t *testing.T, faults []txnFault, repeat int) {
	c := startCluster(t, 3, map[string]string{
		"transaction.state.log.num.partitions":     "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"group.min.session.timeout.ms":             "1000",
	})
	m := &txnMatrix{t: t, c: c, adm: clusterAdmin(t, c), in: "eos-in", out: "eos-out", group: "eos-g"}
	createReplicated(t, c, m.in, 3, 3, nil)
	createReplicated(t, c, m.out, 3, 3, nil)
	ctx := testCtx(t, 5*time.Minute)

	// The input: an idempotent acks=all producer writing keyed records
	// all through the run; values carry a per-key sequence.
	pctx, stopProducing := context.WithCancel(ctx)
	producerDone := make(chan struct{})
	go func() { // owned by the test: stopProducing and producerDone
		defer close(producerDone)
		m.produceInput(pctx)
	}()
	t.Cleanup(func() { stopProducing(); <-producerDone })

	for i := range 2 {
		m.startMember(&pipelineMember{spec: pipelineSpec{Addrs: c.AllAddrs(), In: m.in, Out: m.out, Group: m.group,
			TxnID: fmt.Sprintf("eos-member-%d", i)}, log: filepath.Join(t.TempDir(), "member.log")})
	}
	t.Cleanup(func() {
		for _, pm := range m.members {
			m.stopMember(pm, true)
		}
		if t.Failed() {
			m.dumpTransactions()
			for _, pm := range m.members {
				b, _ := os.ReadFile(pm.log)
				t.Logf("member %s log tail:\n%s", pm.spec.TxnID, tail(string(b), 80))
			}
		}
	})
	m.awaitProgress(200)

	for r := range repeat {
		for _, f := range faults {
			if f.broker == nil {
				pm := m.members[r%len(m.members)]
				t.Logf("%s: kill -9 member %s", f.name, pm.spec.TxnID)
				m.stopMember(pm, true)
				m.awaitProgress(100) // the other member takes over its partitions
				m.startMember(pm)
				m.awaitProgress(100)
				continue
			}
			id := f.broker(m)
			t.Logf("%s: kill -9 broker %d", f.name, id)
			c.Broker(id).Kill9()
			m.awaitProgress(100) // the pipeline goes on without it
			c.Broker(id).Restart(t)
			m.awaitFullISR()
			m.awaitProgress(100)
		}
	}

	stopProducing()
	<-producerDone
	// Every input record consumed and committed, then the members stop
	// (cleanly; the last transactions are committed or aborted).
	ends := m.listEnds(m.in, false)
	waitUntil(t, 2*time.Minute, "the group's committed offsets at the input's end", func() error {
		committed, err := m.committed()
		if err != nil {
			return err
		}
		for p, end := range ends {
			if committed[p] != end {
				return fmt.Errorf("committed %v, input ends %v", committed, ends)
			}
		}
		return nil
	})
	for _, pm := range m.members {
		m.stopMember(pm, false)
		pm.mu.Lock()
		if len(pm.exits) > 0 {
			t.Logf("member %s exited unexpectedly and was restarted: %q", pm.spec.TxnID, pm.exits)
		}
		pm.mu.Unlock()
	}

	input := m.readByKey(m.in, kgo.ReadUncommitted())
	output := m.readByKey(m.out, kgo.ReadCommitted())
	n := 0
	for k, want := range input {
		n += len(want)
		if got := output[k]; !slices.Equal(got, want) {
			t.Errorf("key %s: read_committed output %s, want the input %s", k, summarizeValues(got), summarizeValues(want))
		}
	}
	for k, got := range output {
		if _, ok := input[k]; !ok {
			t.Errorf("key %s in the output (%d records) but not in the input", k, len(got))
		}
	}
	t.Logf("%d input records (%d produced), %d keys, all in the output exactly once in order", n, m.produced.Load(), len(input))
	if n < 500 {
		t.Errorf("only %d input records: the run proves little", n)
	}
}

// dumpTransactions logs what the brokers say about transactions and
// producers, and with VLTAVA_TXN_MATRIX_LOGS=DIR copies every broker's
// and member's log there.
func (m *txnMatrix) dumpTransactions() {
	t := m.t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.c.AllAddrs()...))
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if ls, err := adm.ListTransactions(ctx, nil, nil); err == nil {
		ds, err := adm.DescribeTransactions(ctx, ls.TransactionalIDs()...)
		t.Logf("transactions: %+v %v", ds, err)
	}
	for _, topic := range []string{"__consumer_offsets", m.out} {
		ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
		t.Logf("producers of %s: %+v %v", topic, ps, err)
	}
	if dir := os.Getenv("VLTAVA_TXN_MATRIX_LOGS"); dir != "" {
		for _, p := range m.c.Brokers() {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("broker-%d.log", p.NodeID())), []byte(p.Log()), 0o644)
		}
		for _, pm := range m.members {
			b, _ := os.ReadFile(pm.log)
			_ = os.WriteFile(filepath.Join(dir, pm.spec.TxnID+".log"), b, 0o644)
		}
	}
}

// summarizeValues shows a record list briefly for failure messages.
func summarizeValues(vs []string) string {
	if len(vs) <= 6 {
		return fmt.Sprintf("%q", vs)
	}
	return fmt.Sprintf("%d records %q … %q", len(vs), vs[:3], vs[len(vs)-3:])
}

// produceInput writes keyed records "kKK-SSSSSS" to the input topic
// until ctx ends, about 200 a second.
func (m *txnMatrix) produceInput(ctx context.Context) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.c.AllAddrs()...), kgo.ClientID("eos-input"),
		kgo.DefaultProduceTopic(m.in), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30), kgo.RetryTimeout(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(200*time.Millisecond))
	if err != nil {
		m.t.Error(err)
		return
	}
	defer cl.Close()
	const keys = 20
	seq := make([]int, keys)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := cl.Flush(fctx); err != nil {
				m.t.Errorf("flush the input: %v", err)
			}
			cancel()
			return
		case <-tick.C:
		}
		for range 10 {
			k := i % keys
			i++
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%02d", k), Value: fmt.Appendf(nil, "k%02d-%06d", k, seq[k])}
			seq[k]++
			cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
				if err == nil {
					m.produced.Add(1)
				}
			})
		}
	}
}

// startMember starts (or restarts) a member process.
func (m *txnMatrix) startMember(pm *pipelineMember) {
	m.t.Helper()
	pm.mu.Lock()
	pm.stopping = false
	err := m.spawnLocked(pm)
	pm.mu.Unlock()
	if err != nil {
		m.t.Fatal(err)
	}
	if !slices.Contains(m.members, pm) {
		m.members = append(m.members, pm)
	}
}

// spawnLocked starts pm's process with pm.mu held. A member that exits
// when the test did not stop it is restarted, as a supervisor would, and
// the exit is recorded for the test's log.
func (m *txnMatrix) spawnLocked(pm *pipelineMember) error {
	raw, _ := json.Marshal(pm.spec)
	logf, err := os.OpenFile(pm.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPipeline+"="+string(raw))
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start member %s: %w", pm.spec.TxnID, err)
	}
	done := make(chan struct{})
	pm.cmd, pm.done = cmd, done
	go func() { // owned by pm: done closes when the process is reaped
		defer close(done)
		err := cmd.Wait()
		logf.Close()
		time.Sleep(200 * time.Millisecond) // no busy loop of restarts
		pm.mu.Lock()
		defer pm.mu.Unlock()
		if pm.stopping {
			return
		}
		pm.exits = append(pm.exits, fmt.Sprintf("%v after %q", err, lastPipelineError(pm.log)))
		_ = m.spawnLocked(pm) // stopMember waits for the new done
	}()
	return nil
}

// lastPipelineError is the last error line runPipeline wrote to the log.
func lastPipelineError(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], ": end (") || strings.Contains(lines[i], ": begin: ") {
			return lines[i]
		}
	}
	return ""
}

// stopMember ends a member: kill -9 when kill is set, else SIGTERM (it
// finishes its transaction and leaves the group).
func (m *txnMatrix) stopMember(pm *pipelineMember, kill bool) {
	pm.mu.Lock()
	pm.stopping = true
	cmd, done := pm.cmd, pm.done
	pm.mu.Unlock()
	if cmd == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		m.t.Errorf("member %s did not exit within 30 s of %v", pm.spec.TxnID, sig)
	}
}

// coordinator is the node FindCoordinator names for key (type 0 group,
// 1 transaction).
func (m *txnMatrix) coordinator(typ int8, key string) int32 {
	t := m.t
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = typ, []string{key}
	var node int32
	waitUntil(t, 30*time.Second, "the coordinator of "+key, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, clusterClient(t, m.c))
		if err != nil {
			return err
		}
		co := resp.Coordinators[0]
		if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
			return err
		}
		if !m.c.Broker(co.NodeID).Running() {
			return fmt.Errorf("coordinator %d is down", co.NodeID)
		}
		node = co.NodeID
		return nil
	})
	return node
}

// committed is the group's committed offset per input partition.
func (m *txnMatrix) committed() (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[int32]int64{}
	// A fresh client each time: franz-go keeps a coordinator it cannot
	// dial cached for as long as its retries last.
	cl, err := kgo.NewClient(kgo.SeedBrokers(m.c.AllAddrs()...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, m.group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, err
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == m.in {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

// awaitProgress waits until the group has committed n more input records.
func (m *txnMatrix) awaitProgress(n int64) {
	m.t.Helper()
	sum := func() (int64, error) {
		var s int64
		c, err := m.committed()
		for _, o := range c {
			s += max(o, 0)
		}
		return s, err
	}
	var from int64
	waitUntil(m.t, 60*time.Second, "the group's committed offsets", func() (err error) {
		from, err = sum()
		return err
	})
	waitUntil(m.t, 90*time.Second, fmt.Sprintf("%d more records through the pipeline (from %d)", n, from), func() error {
		got, err := sum()
		if err == nil && got < from+n {
			err = fmt.Errorf("committed %d", got)
		}
		return err
	})
}

// awaitFullISR waits until every partition of the topics the pipeline
// uses has all three replicas in sync again.
func (m *txnMatrix) awaitFullISR() {
	m.t.Helper()
	waitUntil(m.t, 90*time.Second, "full ISRs", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := m.adm.Metadata(ctx, m.in, m.out, "__consumer_offsets", "__transaction_state")
		if err != nil {
			return err
		}
		for _, td := range md.Topics {
			if td.Err != nil {
				return fmt.Errorf("%s: %v", td.Topic, td.Err)
			}
			for _, pd := range td.Partitions {
				if pd.Leader < 0 || len(pd.ISR) != 3 {
					return fmt.Errorf("%s/%d: leader %d ISR %v", td.Topic, pd.Partition, pd.Leader, pd.ISR)
				}
			}
		}
		return nil
	})
}

// listEnds lists the end offsets of topic (read_committed: the LSOs).
func (m *txnMatrix) listEnds(topic string, committed bool) map[int32]int64 {
	t := m.t
	t.Helper()
	list := m.adm.ListEndOffsets
	if committed {
		list = m.adm.ListCommittedOffsets
	}
	out := map[int32]int64{}
	waitUntil(t, 30*time.Second, "end offsets of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := list(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return err
		}
		l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return nil
	})
	return out
}

// readByKey reads every record of topic at the isolation level: a
// sentinel record written to each partition afterwards marks the end, so
// a read_committed reader gets there only if the last stable offset
// passes every transaction.
func (m *txnMatrix) readByKey(topic string, iso kgo.IsolationLevel) map[string][]string {
	t := m.t
	t.Helper()
	p := clusterClient(t, m.c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t, 90*time.Second)
	sentinel := []byte("end-" + topic)
	for part := range int32(3) {
		if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: sentinel}).FirstErr(); err != nil {
			t.Fatalf("sentinel to %s/%d: %v", topic, part, err)
		}
	}
	cl := clusterClient(t, m.c, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[string][]string{}
	ended := map[int32]bool{}
	for len(ended) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: sentinels seen in partitions %v only; read %d keys", topic, ended, len(out))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if bytes.Equal(r.Value, sentinel) {
				ended[r.Partition] = true
				return
			}
			out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
		})
	}
	return out
}
