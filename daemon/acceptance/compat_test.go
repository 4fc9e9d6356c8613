package acceptance

import (
	"bytes"
	stdcmp "cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/go-cmp/cmp"
	segkafka "github.com/segmentio/kafka-go"
	segcompress "github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vltava/vltava/daemon/daemontest"
)

// The client compatibility matrix: every client the tests drive, every
// feature, pass or fail against a real vltavad. The committed matrix is
// the expectation; a cell that changes fails this test until the matrix
// is regenerated:
//
//	go test ./daemon/acceptance -run TestCompatibilityMatrix -update-compat
var updateCompat = flag.Bool("update-compat", false, "rewrite conformance/docs/client-compatibility.md from this run")

const compatPath = "../../conformance/docs/client-compatibility.md"

// compatFeatures are the matrix's columns, in order.
var compatFeatures = []string{
	"produce none", "produce gzip", "produce snappy", "produce lz4", "produce zstd",
	"consume", "idempotent", "transactions", "group classic", "group KIP-848",
}

// cell outcomes. notRun cells (a missing program) match anything.
const (
	pass   = "pass"
	na     = "n/a"
	notRun = "not run"
)

// compatClient is one column of functions per feature; a nil one means
// the client has no such feature (n/a).
type compatClient struct {
	name     string
	missing  func() string // why it cannot run here, or ""
	features map[string]func(ctx context.Context, addr, topic string) error
	// secure produces the compat values through a secured listener (the
	// security columns); secureNA lists the columns it has no mechanism
	// for, secureMissing why a column cannot run here ("" when it can).
	secure        func(ctx context.Context, s secCell, topic string) error
	secureNA      []string
	secureMissing map[string]string
}

const compatRecords = 20

func compatValue(i int) string { return fmt.Sprintf("compat-%03d", i) }

// expectValues reads topic with franz-go and checks it holds exactly the
// compatRecords values, once each.
func expectValues(ctx context.Context, addr, topic string, committedOnly bool) error {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committedOnly {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	seen := map[string]int{}
	for len(seen) < compatRecords {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read back %d of %d values", len(seen), compatRecords)
		}
		if err := fs.Err(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for i := range compatRecords {
		if seen[compatValue(i)] != 1 {
			return fmt.Errorf("value %s read %d times", compatValue(i), seen[compatValue(i)])
		}
	}
	return nil
}

// seed writes compatRecords values with franz-go for the consume cells
// (snappy-compressed, franz-go's default, unless opts say otherwise).
func seed(ctx context.Context, addr, topic string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range compatRecords {
		rs = append(rs, kgo.StringRecord(compatValue(i)))
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

func franzFeatures() map[string]func(ctx context.Context, addr, topic string) error {
	produce := func(codec kgo.CompressionCodec, extra ...kgo.Opt) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
				kgo.ProducerBatchCompression(codec), kgo.AllowAutoTopicCreation()}, extra...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			var rs []*kgo.Record
			for i := range compatRecords {
				rs = append(rs, kgo.StringRecord(compatValue(i)))
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, false)
		}
	}
	group := func(extra ...kgo.Opt) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("compat-" + topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, extra...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			return pollValues(ctx, cl)
		}
	}
	return map[string]func(ctx context.Context, addr, topic string) error{
		"produce none":   produce(kgo.NoCompression()),
		"produce gzip":   produce(kgo.GzipCompression()),
		"produce snappy": produce(kgo.SnappyCompression()),
		"produce lz4":    produce(kgo.Lz4Compression()),
		"produce zstd":   produce(kgo.ZstdCompression()),
		"consume": func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, false)
		},
		"idempotent": produce(kgo.NoCompression(), kgo.RequiredAcks(kgo.AllISRAcks())),
		"transactions": func(ctx context.Context, addr, topic string) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
				kgo.TransactionalID("compat-"+topic), kgo.TransactionTimeout(10*time.Second), kgo.RetryTimeout(5*time.Second))
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := cl.BeginTransaction(); err != nil {
				return err
			}
			for i := range compatRecords {
				cl.Produce(ctx, kgo.StringRecord(compatValue(i)), nil)
			}
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, true)
		},
		"group classic": group(kgo.Balancers(kgo.CooperativeStickyBalancer())),
		"group KIP-848": group(kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())),
	}
}

// pollValues polls a group member until every value arrived once.
func pollValues(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < compatRecords {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("the group member read %d of %d values", len(seen), compatRecords)
		}
		if err := fs.Err(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	return nil
}

func saramaFeatures() map[string]func(ctx context.Context, addr, topic string) error {
	produce := func(codec sarama.CompressionCodec, idempotent bool) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			cfg := saramaConfig()
			cfg.Producer.Compression = codec
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			if idempotent {
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
			}
			p, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			var ms []*sarama.ProducerMessage
			for i := range compatRecords {
				ms = append(ms, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(compatValue(i))})
			}
			if err := p.SendMessages(ms); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, false)
		}
	}
	return map[string]func(ctx context.Context, addr, topic string) error{
		"produce none":   produce(sarama.CompressionNone, false),
		"produce gzip":   produce(sarama.CompressionGZIP, false),
		"produce snappy": produce(sarama.CompressionSnappy, false),
		"produce lz4":    produce(sarama.CompressionLZ4, false),
		"produce zstd":   produce(sarama.CompressionZSTD, false),
		"idempotent":     produce(sarama.CompressionNone, true),
		"consume": func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			c, err := sarama.NewConsumer([]string{addr}, saramaConfig())
			if err != nil {
				return err
			}
			defer c.Close()
			pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				return err
			}
			defer pc.Close()
			for i := range compatRecords {
				select {
				case m := <-pc.Messages():
					if string(m.Value) != compatValue(i) {
						return fmt.Errorf("record %d: %q", i, m.Value)
					}
				case err := <-pc.Errors():
					return err
				case <-time.After(15 * time.Second):
					return fmt.Errorf("read %d of %d values", i, compatRecords)
				}
			}
			return nil
		},
		"transactions": func(ctx context.Context, addr, topic string) error {
			cfg := saramaConfig()
			cfg.Producer.Idempotent = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Return.Successes = true
			cfg.Producer.Transaction.ID = "compat-sarama-" + topic
			cfg.Producer.Transaction.Retry.Max, cfg.Producer.Transaction.Retry.Backoff = 2, 200*time.Millisecond
			cfg.Metadata.Retry.Max = 2
			cfg.Net.MaxOpenRequests = 1
			p, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			if err := p.BeginTxn(); err != nil {
				return err
			}
			for i := range compatRecords {
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(compatValue(i))}); err != nil {
					return err
				}
			}
			if err := p.CommitTxn(); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, true)
		},
		"group classic": func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			cfg := saramaConfig()
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			g, err := sarama.NewConsumerGroup([]string{addr}, "compat-"+topic, cfg)
			if err != nil {
				return err
			}
			defer g.Close()
			h := &collectHandler{want: compatRecords, done: make(chan struct{})}
			gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- g.Consume(gctx, []string{topic}, h) }()
			select {
			case <-h.done:
				cancel()
				<-errc
				return nil
			case err := <-errc:
				if err == nil {
					err = fmt.Errorf("the group session ended with %d of %d values", h.n(), compatRecords)
				}
				return err
			}
		},
	}
}

// collectHandler is a sarama group member that counts records.
type collectHandler struct {
	mu   sync.Mutex
	seen map[string]bool
	want int
	done chan struct{}
	once sync.Once
}

func (h *collectHandler) n() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.seen) }

func (h *collectHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *collectHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *collectHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		if h.seen == nil {
			h.seen = map[string]bool{}
		}
		h.seen[string(m.Value)] = true
		full := len(h.seen) >= h.want
		h.mu.Unlock()
		sess.MarkMessage(m, "")
		if full {
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func kcatFeatures(kcat string) map[string]func(ctx context.Context, addr, topic string) error {
	run := func(ctx context.Context, stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, kcat, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("kcat %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out.String(), nil
	}
	lines := func() string {
		var b strings.Builder
		for i := range compatRecords {
			b.WriteString(compatValue(i) + "\n")
		}
		return b.String()
	}
	produce := func(codec string, extra ...string) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			args := append([]string{"-P", "-b", addr, "-t", topic, "-z", codec, "-X", "acks=all"}, extra...)
			if _, err := run(ctx, lines(), args...); err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, false)
		}
	}
	return map[string]func(ctx context.Context, addr, topic string) error{
		"produce none":   produce("none"),
		"produce gzip":   produce("gzip"),
		"produce snappy": produce("snappy"),
		"produce lz4":    produce("lz4"),
		"produce zstd":   produce("zstd"),
		"idempotent":     produce("none", "-X", "enable.idempotence=true"),
		"consume": func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			out, err := run(ctx, "", "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q")
			if err != nil {
				return err
			}
			return sameValues(strings.Fields(out))
		},
		"group classic": func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			// kcat -G has no "exit at end"; stop it once every value is in.
			gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(gctx, kcat, "-u", "-b", addr, "-G", "compat-"+topic, "-X", "auto.offset.reset=earliest",
				"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300", "-q", topic)
			var out bytes.Buffer
			var mu sync.Mutex
			cmd.Stdout = lockedWriter{&mu, &out}
			if err := cmd.Start(); err != nil {
				return err
			}
			for {
				mu.Lock()
				n := strings.Count(out.String(), "\n")
				mu.Unlock()
				if n >= compatRecords || gctx.Err() != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			cmd.Process.Kill()
			cmd.Wait()
			return sameValues(strings.Fields(out.String()))
		},
	}
}

// kcatVersion is "kcat X (librdkafka Y)" from kcat -V.
func kcatVersion(kcat string) string {
	out, _ := exec.Command(kcat, "-V").Output()
	after := func(prefix string) string {
		if i := strings.Index(string(out), prefix); i >= 0 {
			if fs := strings.Fields(string(out)[i+len(prefix):]); len(fs) > 0 {
				return fs[0]
			}
		}
		return "?"
	}
	return fmt.Sprintf("kcat %s (librdkafka %s)", after("Version "), after("librdkafka "))
}

// lockedWriter lets a test read what a process writes while it runs.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func sameValues(got []string) error {
	want := make([]string, compatRecords)
	for i := range want {
		want[i] = compatValue(i)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("read %d values, want the %d written", len(got), compatRecords)
	}
	return nil
}

func segmentioFeatures() map[string]func(ctx context.Context, addr, topic string) error {
	produce := func(codec segcompress.Compression) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			w := &segkafka.Writer{Addr: segkafka.TCP(addr), Topic: topic, Compression: codec, RequiredAcks: segkafka.RequireAll,
				AllowAutoTopicCreation: true, BatchTimeout: 10 * time.Millisecond}
			defer w.Close()
			var ms []segkafka.Message
			for i := range compatRecords {
				ms = append(ms, segkafka.Message{Value: []byte(compatValue(i))})
			}
			var err error
			for try := 0; try < 20; try++ { // the topic is created by the first metadata request
				if err = w.WriteMessages(ctx, ms...); err == nil || !errors.Is(err, segkafka.UnknownTopicOrPartition) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				return err
			}
			return expectValues(ctx, addr, topic, false)
		}
	}
	read := func(group bool) func(ctx context.Context, addr, topic string) error {
		return func(ctx context.Context, addr, topic string) error {
			if err := seed(ctx, addr, topic); err != nil {
				return err
			}
			cfg := segkafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, MaxWait: 200 * time.Millisecond}
			if group {
				cfg.GroupID, cfg.StartOffset = "compat-"+topic, segkafka.FirstOffset
			}
			r := segkafka.NewReader(cfg)
			defer r.Close()
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			var got []string
			for len(got) < compatRecords {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return fmt.Errorf("after %d values: %w", len(got), err)
				}
				got = append(got, string(m.Value))
			}
			return sameValues(got)
		}
	}
	return map[string]func(ctx context.Context, addr, topic string) error{
		"produce none":   produce(0),
		"produce gzip":   produce(segkafka.Gzip),
		"produce snappy": produce(segkafka.Snappy),
		"produce lz4":    produce(segkafka.Lz4),
		"produce zstd":   produce(segkafka.Zstd),
		"consume":        read(false),
		"group classic":  read(true),
	}
}

// TestCompatibilityMatrix runs every client against every feature on a
// real vltavad and compares the outcomes with the committed matrix.
func TestCompatibilityMatrix(t *testing.T) {
	d := startDaemon(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	addr := d.Addr()
	sec := startCompatSecure(t, daemontest.Build(t))
	kcat, kcatErr := exec.LookPath("kcat")
	kjs, kjsMissing := installKafkajs(t.TempDir())
	clients := []compatClient{
		{name: "franz-go (kgo)", features: franzFeatures(), secure: franzSecure},
		{name: "sarama", features: saramaFeatures(), secure: saramaSecure},
		{name: "kcat (librdkafka)", missing: func() string {
			if kcatErr != nil {
				return "kcat not installed (Debian package kcat)"
			}
			return ""
		}, secureMissing: map[string]string{"SASL GSSAPI": kcatGSSAPIMissing()}},
		{name: "segmentio/kafka-go", features: segmentioFeatures(), secure: segmentioSecure, secureNA: []string{"SASL GSSAPI"}},
		{name: "kafkajs", missing: func() string { return kjsMissing }, secureNA: []string{"SASL GSSAPI"}},
	}
	if kcatErr == nil {
		clients[2].features, clients[2].secure = kcatFeatures(kcat), kcatSecure(kcat)
	}
	if kjs != nil {
		clients[4].features, clients[4].secure = kjs.features(), kjs.secure
	} else {
		t.Logf("kafkajs not run: %s", kjsMissing)
	}
	// Cells run eight at a time, each on a topic of its own.
	got := map[string]map[string]string{}
	var mu sync.Mutex
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	n := 0
	run := func(c compatClient, f string, fn func(ctx context.Context, topic string) error) {
		n++
		topic := fmt.Sprintf("compat-%d", n)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			start := time.Now()
			err := fn(ctx, topic)
			cancel()
			if took := time.Since(start); took > 5*time.Second {
				t.Logf("%s / %s took %v", c.name, f, took.Round(time.Millisecond))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				got[c.name][f] = "fail"
				t.Logf("%s / %s: %v", c.name, f, err)
			} else {
				got[c.name][f] = pass
			}
		})
	}
	for _, c := range clients {
		got[c.name] = map[string]string{}
		missing := ""
		if c.missing != nil {
			missing = c.missing()
		}
		for _, f := range compatFeatures {
			fn := c.features[f]
			switch {
			case missing != "":
				got[c.name][f] = notRun
			case fn == nil:
				got[c.name][f] = na
			default:
				run(c, f, func(ctx context.Context, topic string) error { return fn(ctx, addr, topic) })
			}
		}
		for _, f := range compatSecurity {
			cell, ok := sec.cells[f]
			why := stdcmp.Or(missing, c.secureMissing[f], sec.skipped[f])
			switch {
			case slices.Contains(c.secureNA, f) || (c.secure == nil && missing == ""):
				got[c.name][f] = na
			case why != "" || !ok:
				got[c.name][f] = notRun
				if missing == "" {
					t.Logf("%s / %s not run: %s", c.name, f, why)
				}
			default:
				run(c, f, func(ctx context.Context, topic string) error {
					if err := c.secure(ctx, cell, topic); err != nil {
						return err
					}
					return expectValues(ctx, cell.plainAddr, topic, false)
				})
			}
		}
	}
	wg.Wait()
	versions := ""
	if kcatErr == nil {
		versions += ", " + kcatVersion(kcat)
	}
	if kjs != nil {
		versions += ", " + kjs.version()
	}
	doc := renderCompat(clients, got, versions)
	if *updateCompat {
		if err := os.WriteFile(compatPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := parseCompat(compatPath)
	if err != nil {
		t.Fatalf("%v (regenerate with -update-compat)", err)
	}
	for client, row := range got {
		for f, v := range row {
			w, ok := want[client][f]
			if !ok {
				t.Errorf("%s / %s: %s, and the matrix has no such cell (regenerate with -update-compat)", client, f, v)
				continue
			}
			if v == notRun || w == notRun {
				continue
			}
			if v != w {
				t.Errorf("%s / %s: %s, the matrix says %s (regenerate with -update-compat if this is intended)", client, f, v, w)
			}
		}
	}
	if diff := cmp.Diff(len(want), len(got)); diff != "" {
		t.Errorf("clients in the matrix differ from those tested (-want +got): %s", diff)
	}
}

func renderCompat(clients []compatClient, got map[string]map[string]string, versions string) string {
	var b strings.Builder
	b.WriteString("# Client compatibility\n\n")
	b.WriteString("Generated by `go test ./daemon/acceptance -run TestCompatibilityMatrix -update-compat`: each client\n")
	b.WriteString("library drives each feature against a real vltavad, and the result is read back with franz-go\n")
	b.WriteString("(transactions with read_committed). The same test, run without the flag, fails when a cell changes.\n")
	b.WriteString("`n/a`: the client has no such feature. `not run`: the client (or what the cell needs, such as a\n")
	b.WriteString("Kerberos KDC) is not installed where the matrix was made.\n\n")
	fmt.Fprintf(&b, "Go %s, %s/%s%s; the Go clients' versions are go.mod's.\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, versions)
	table := func(cols []string) {
		b.WriteString("| client | " + strings.Join(cols, " | ") + " |\n")
		b.WriteString("|---" + strings.Repeat("|---", len(cols)) + "|\n")
		for _, c := range clients {
			row := []string{c.name}
			for _, f := range cols {
				row = append(row, got[c.name][f])
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	table(compatFeatures)
	b.WriteString("\nkafkajs builds in gzip only; snappy, lz4 and zstd need codec packages of their own\n")
	b.WriteString("(kafkajs-snappy, kafkajs-lz4, @kafkajs/zstd), which the matrix does not install. kafkajs is\n")
	b.WriteString("pinned by `daemon/acceptance/testdata/kafkajs/package-lock.json`.\n\n")
	b.WriteString("## Security\n\n")
	b.WriteString("Each client produces through a SASL_PLAINTEXT listener (the `simple` authenticator's PLAIN and\n")
	b.WriteString("SCRAM over stored SCRAM credentials; `kerberos` with a keytab against a test MIT KDC for GSSAPI),\n")
	b.WriteString("an SSL listener, an SSL listener with `ssl.client.auth: required`, and a SASL_SSL listener (SCRAM over\n")
	b.WriteString("TLS); franz-go reads the records back on the broker's PLAINTEXT listener. segmentio/kafka-go and\n")
	b.WriteString("kafkajs have no GSSAPI mechanism.\n\n")
	table(compatSecurity)
	return b.String()
}

// parseCompat reads the committed matrix back into client → feature → outcome.
func parseCompat(path string) (map[string]map[string]string, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	var header []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			header = nil // tables are separated by text
			continue
		}
		if !strings.HasPrefix(line, "| ") {
			continue // |---|---|
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if header == nil {
			header = cells
			continue
		}
		if header[0] != "client" {
			continue // another table of the page, such as the peer suites'
		}
		row := out[cells[0]]
		if row == nil {
			row = map[string]string{}
		}
		for i := 1; i < len(cells) && i < len(header); i++ {
			row[header[i]] = cells[i]
		}
		out[cells[0]] = row
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no matrix rows", path)
	}
	return out, nil
}
