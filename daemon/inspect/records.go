package inspect

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PageSize is the most records one Records call returns; a page never
// needs more than this many in memory, and at most MaxPageBytes of them.
const (
	PageSize     = 50
	MaxPageBytes = 4 << 20
)

// Field is a key, value or header value rendered for people: text as is,
// JSON pretty-printed, anything else as hex (truncated).
type Field struct {
	Null bool
	Kind string // "text", "json", "binary", "null"
	Text string
	Size int
}

// Header is one rendered record header.
type Header struct {
	Key   string
	Value Field
}

// Record is one record as shown.
type Record struct {
	Offset    int64
	Timestamp time.Time
	Key       Field
	Value     Field
	Headers   []Header
}

// maxShown bounds a rendered field.
const maxShown = 16 << 10

// Render renders b for display.
func Render(b []byte) Field {
	if b == nil {
		return Field{Null: true, Kind: "null"}
	}
	f := Field{Size: len(b)}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		var out bytes.Buffer
		if json.Indent(&out, trimmed, "", "  ") == nil {
			f.Kind, f.Text = "json", clip(out.String())
			return f
		}
	}
	if utf8.Valid(b) && printable(b) {
		f.Kind, f.Text = "text", clip(string(b))
		return f
	}
	shown := b
	if len(shown) > maxShown/2 {
		shown = shown[:maxShown/2]
	}
	f.Kind, f.Text = "binary", hex.EncodeToString(shown)
	if len(shown) < len(b) {
		f.Text += "…"
	}
	return f
}

func printable(b []byte) bool {
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ErrNoRecords: nothing at or after the position asked for.
var ErrNoRecords = errors.New("inspect: no records there")

// Records reads up to n (at most PageSize) records of one partition from
// offset, or from the first record at or after timestamp ts when ts >= 0.
// It uses a client of its own, closed before it returns, so a page never
// holds more than its own records.
func (in *Inspector) Records(ctx context.Context, topic string, partition int32, offset int64, ts int64, n int) ([]Record, error) {
	n = min(max(n, 1), PageSize)
	at := kgo.NewOffset().At(offset)
	if ts >= 0 {
		at = kgo.NewOffset().AfterMilli(ts)
	}
	addr := in.addr()
	if addr == "" {
		return nil, ErrNotListening
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ClientID("vltava-console"), Software,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: at}}),
		kgo.FetchMaxBytes(MaxPageBytes), kgo.FetchMaxPartitionBytes(MaxPageBytes),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, in.opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// An empty tail answers after one long poll, not after ctx's end.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var out []Record
	for len(out) < n {
		fs := cl.PollRecords(ctx, n-len(out))
		if errs := fs.Errors(); len(errs) > 0 {
			if ctx.Err() != nil {
				break
			}
			return out, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			rec := Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: Render(r.Key), Value: Render(r.Value)}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: Render(h.Value)})
			}
			out = append(out, rec)
		})
		if fs.NumRecords() == 0 && ctx.Err() != nil {
			break
		}
	}
	if len(out) == 0 {
		return nil, ErrNoRecords
	}
	return out, nil
}
