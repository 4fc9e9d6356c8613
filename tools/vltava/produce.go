package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var produceCommands = []command{
	{path: "produce", args: "TOPIC", summary: "produce stdin lines (or -n generated records)", run: produceCmd},
}

// maxLine is the longest stdin line produce accepts: Kafka's default
// message.max.bytes plus room for a key.
const maxLine = 2 << 20

// producerFlags are the producer settings shared by produce and perf produce.
type producerFlags struct {
	acks        string
	compression string
	linger      time.Duration
	partition   int
}

func (p *producerFlags) register(f *cmdFlags) {
	f.StringVar(&p.acks, "acks", "all", "required acks: all (-1), 1 or 0")
	f.StringVar(&p.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	f.DurationVar(&p.linger, "linger", 0, "wait this long for a batch to fill before sending")
	f.IntVar(&p.partition, "partition", -1, "produce to this partition only (-1: the default partitioner)")
}

// opts converts the flags into client options. A record not acknowledged
// within --timeout fails (Kafka's delivery.timeout.ms), so an unreachable
// broker gives an error instead of a hang.
func (p *producerFlags) opts(e *env) ([]kgo.Opt, error) {
	// Like the Java producer and kcat, producing to a missing topic asks
	// the broker to create it (if auto.create.topics.enable allows).
	opts := []kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(e.timeout)}
	switch p.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("--acks %q: want all, -1, 1 or 0", p.acks)
	}
	codec, ok := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[p.compression]
	if !ok {
		return nil, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", p.compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(p.linger))
	if p.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}

// record builds a record for the topic honouring --partition.
func (p *producerFlags) record(topic string, key, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: key, Value: value, Partition: int32(p.partition)}
}

func produceCmd(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var pf producerFlags
	pf.register(f)
	keySep := f.String("k", "", "split each line at the first occurrence of this `SEPARATOR` into key and value; "+
		"a line without it is an error (an empty key before it is an empty key, not a null one)")
	var hdrs listFlag
	f.Var(&hdrs, "H", "header key=value added to every record (repeatable)")
	n := f.Int("n", 0, "produce N generated records instead of reading stdin")
	size := f.Int("s", 100, "value size in bytes of generated records (with -n)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	headers, err := keyValues(hdrs)
	if err != nil {
		return err
	}
	opts, err := pf.opts(e)
	if err != nil {
		return err
	}
	cl, err := e.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	topic := pos[0]
	p := &producer{cl: cl, start: time.Now()}
	next := lineSource(e.stdin, *keySep)
	if *n > 0 {
		next = generatedSource(*n, *size)
	}
	for {
		key, value, ok, err := next()
		if err != nil {
			// Report what was produced before the bad line, then the line.
			if ferr := p.finish(e.stdout, topic); ferr != nil {
				return errors.Join(err, ferr)
			}
			return err
		}
		if !ok {
			break
		}
		r := pf.record(topic, key, value)
		for _, h := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		p.produce(ctx, r)
	}
	return p.finish(e.stdout, topic)
}

// producer produces asynchronously and remembers the first failure.
type producer struct {
	cl    *kgo.Client
	start time.Time
	wg    sync.WaitGroup

	mu      sync.Mutex
	ok      int
	bytes   int64
	firstEr error
}

func (p *producer) produce(ctx context.Context, r *kgo.Record) {
	p.wg.Add(1)
	p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		defer p.wg.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			if p.firstEr == nil {
				p.firstEr = err
			}
			return
		}
		p.ok++
		p.bytes += int64(len(r.Key) + len(r.Value))
	})
}

// finish waits for every promise and prints the summary.
func (p *producer) finish(w io.Writer, topic string) error {
	p.wg.Wait()
	elapsed := time.Since(p.start)
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(w, "produced %d records (%d bytes) to %s in %s\n", p.ok, p.bytes, topic, elapsed.Round(time.Millisecond))
	if p.firstEr != nil {
		return fmt.Errorf("produce: %w", p.firstEr)
	}
	return nil
}

// source yields one record's key and value per call; ok is false at the end.
type source func() (key, value []byte, ok bool, err error)

func lineSource(r io.Reader, keySep string) source {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	lineNo := 0
	return func() ([]byte, []byte, bool, error) {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return nil, nil, false, fmt.Errorf("read stdin: %w", err)
			}
			return nil, nil, false, nil
		}
		lineNo++
		line := sc.Text()
		if keySep != "" {
			k, v, found := strings.Cut(line, keySep)
			if !found {
				return nil, nil, false, fmt.Errorf("line %d has no key separator %q (-k): %.40q", lineNo, keySep, line)
			}
			return []byte(k), []byte(v), true, nil
		}
		return nil, []byte(line), true, nil
	}
}

// generatedSource yields n records of size bytes; the value starts with the
// record's sequence number so a consumer can tell records apart.
func generatedSource(n, size int) source {
	i := 0
	return func() ([]byte, []byte, bool, error) {
		if i >= n {
			return nil, nil, false, nil
		}
		v := fillValue(make([]byte, size), i)
		i++
		return nil, v, true, nil
	}
}

// fillValue writes seq then a repeating alphabet into v.
func fillValue(v []byte, seq int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz"
	n := copy(v, fmt.Sprintf("%d ", seq))
	for j := n; j < len(v); j++ {
		v[j] = alphabet[j%len(alphabet)]
	}
	return v
}
