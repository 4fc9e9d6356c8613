package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/record"
)

// batchOpts describes a test batch.
type batchOpts struct {
	n         int   // records
	valueSize int   // bytes per value
	ts        int64 // first record's timestamp; record i has ts+i
	pid       int64 // -1 for none
	epoch     int16
	seq       int32
}

func plain(n, valueSize int, ts int64) batchOpts {
	return batchOpts{n: n, valueSize: valueSize, ts: ts, pid: -1, epoch: -1, seq: -1}
}

// makeBatch builds an uncompressed RecordBatch v2 with kmsg and a correct
// CRC32C over the bytes from the attributes field to the end.
func makeBatch(o batchOpts) []byte {
	var recs []byte
	for i := range o.n {
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              fmt.Appendf(nil, "k%d", i),
			Value:            bytes.Repeat([]byte{byte('a' + i%26)}, o.valueSize),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the varint of 0 is one byte
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(o.n - 1),
		FirstTimestamp:       o.ts,
		MaxTimestamp:         o.ts + int64(o.n-1),
		ProducerID:           o.pid,
		ProducerEpoch:        o.epoch,
		FirstSequence:        o.seq,
		NumRecords:           int32(o.n),
		Records:              recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// model is what the test expects the log to hold: every stored batch.
type model struct {
	batches [][]byte // as stored (offsets assigned)
	heads   []record.Header
}

func (m *model) add(stored []byte) {
	for rest := stored; len(rest) > 0; {
		h, b, r, err := record.Next(rest)
		if err != nil {
			panic(err)
		}
		m.batches = append(m.batches, bytes.Clone(b))
		m.heads = append(m.heads, h)
		rest = r
	}
}

// find returns the index of the batch containing offset (the first batch
// whose last offset is >= offset).
func (m *model) find(offset int64) int {
	return sort.Search(len(m.heads), func(i int) bool { return m.heads[i].LastOffset() >= offset })
}

func (m *model) end() int64 {
	if len(m.heads) == 0 {
		return 0
	}
	return m.heads[len(m.heads)-1].LastOffset() + 1
}

func (m *model) truncate(n int) {
	m.batches, m.heads = m.batches[:n], m.heads[:n]
}

// appendBatch appends one batch and records it in the model.
func appendBatch(t testing.TB, l *Log, m *model, o batchOpts) AppendResult {
	t.Helper()
	b := makeBatch(o)
	res, err := l.Append(b, AppendOptions{LeaderEpoch: -1})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if m != nil && !res.Duplicate {
		m.add(b)
	}
	return res
}

// readAll reads the whole log from its start in small steps and checks
// every batch's CRC.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	var out []byte
	off, end := l.StartOffset(), l.EndOffset()
	for off < end {
		s, err := l.Read(off, 3000, end)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := s.Bytes(nil)
		s.Close()
		if err != nil {
			t.Fatalf("slice bytes: %v", err)
		}
		if len(b) == 0 {
			t.Fatalf("empty read at %d below end %d", off, end)
		}
		for rest := b; len(rest) > 0; {
			h, batch, r, err := record.Next(rest)
			if err != nil {
				t.Fatalf("read at %d returned bad batch: %v", off, err)
			}
			if err := record.CheckCRC(batch); err != nil {
				t.Fatalf("read at %d returned corrupt batch: %v", off, err)
			}
			off = h.LastOffset() + 1
			rest = r
		}
		out = append(out, b...)
	}
	return out
}

func (m *model) bytesFrom(i int) []byte {
	var out []byte
	for _, b := range m.batches[i:] {
		out = append(out, b...)
	}
	return out
}

// logBuffer captures slog output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testConfig(w io.Writer) Config {
	if w == nil {
		w = io.Discard
	}
	return Config{
		SegmentBytes:       4096,
		RetentionMs:        -1,
		RetentionBytes:     -1,
		IndexIntervalBytes: 256,
		Logger:             slog.New(slog.NewTextHandler(w, nil)),
	}
}

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// crash abandons l without Close: its descriptors close, nothing is
// flushed and no marker or snapshot is written.
func crash(l *Log) {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.closeAll()
}

func segmentFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
